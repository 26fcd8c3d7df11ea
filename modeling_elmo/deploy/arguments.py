"""The command line of `elmo-export-onnx`: a parser that imports neither torch nor Transformers, so that `--help`
and argument errors answer at once."""

import argparse

from ..foundation.errors import ToolError
from ..foundation.model_location import model_folder_problem

PROG = "elmo-export-onnx"
DEFAULT_TOLERANCE = 1e-5
MIN_OPSET = 18  # the dynamo exporter's lowest


def onnx_export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Export an ELMo folder's ElmoModel to ONNX (every layer, dynamic batch and words), verified "
        "with onnxruntime.",
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="an ELMo folder (config.json + weights)")
    parser.add_argument("output", metavar="OUT.onnx", help="the ONNX file to write")
    parser.add_argument(
        "--opset", type=int, default=None, help=f"ONNX opset (>= {MIN_OPSET}; default: the exporter's)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing OUT.onnx")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"max abs difference from PyTorch allowed in the check (default {DEFAULT_TOLERANCE:g})",
    )
    return parser


def check_onnx_export_command_line(argv: list[str]) -> None:
    """Parse `elmo-export-onnx`'s command line and check that MODEL_DIR is a model folder: `--help` and errors exit
    here."""
    problem = model_folder_problem(onnx_export_parser().parse_args(argv).model_dir)
    if problem is not None:
        raise ToolError(problem)
