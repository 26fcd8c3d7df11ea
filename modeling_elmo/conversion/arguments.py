"""The command lines of `elmo-convert`, `elmo-export` and `elmo-publish` (with `elmo-publish batch`): parsers that
import neither torch nor Transformers, so that `--help` and argument errors answer at once (`modeling_elmo.commands`
parses with them before a command's work is imported)."""

import argparse
import os
from pathlib import Path

from ..commands.arguments import subcommands_epilog
from ..foundation.errors import ToolError
from .presets import ALLENNLP_ELMO_URL, PRESETS

SOURCE_FORMATS = ("original", "elmoformanylangs", "nlpl")  # `--from`
PUBLISH_DESCRIPTION = (
    "Convert the official English ELMo models and publish them under one Hub namespace, each with its model card; "
    "or (`elmo-publish batch`) convert a folder of downloaded models into one folder per model, ready to push."
)


def convert_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-convert",
        description="Convert an ELMo checkpoint (bilm-tf options JSON + HDF5 weights, an NLPL vector repository model "
        "or an ELMoForManyLangs model) to a Transformers folder. See docs/conversion-sources.md.",
    )
    parser.add_argument(
        "--from",
        dest="source_format",
        choices=SOURCE_FORMATS,
        help="format of the source: 'original' (bilm-tf/AllenNLP options JSON + HDF5; the default without "
        "--model-dir), 'nlpl' (an NLPL vector repository model, ZIP or folder; the default with --model-dir) or "
        "'elmoformanylangs' (an ELMoForManyLangs model folder)",
    )
    parser.add_argument("--model-dir", help="the source model: folder, or ZIP / ZIP URL for --from nlpl")
    source = parser.add_argument_group("source (give --preset, both --options and --weights, or --model-dir)")
    source.add_argument("--options", help="options JSON: local path or http(s) URL")
    source.add_argument("--weights", help="HDF5 weights: local path or http(s) URL")
    source.add_argument("--preset", choices=sorted(PRESETS), help="one of the official English models")
    parser.add_argument("--output", required=True, help="folder to write (must not exist unless --overwrite)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing output folder written by elmo-convert (or empty)"
    )
    parser.add_argument(
        "--verify", action="store_true", help="reload the written folder and compare it with the original weights"
    )
    parser.add_argument("--cache-dir", help="where downloaded originals are kept (default: $HF_HOME/elmo-original)")
    publishing = parser.add_argument_group("publishing (the endpoint is $HF_ENDPOINT, default https://huggingface.co)")
    publishing.add_argument(
        "--push-to-hub", metavar="REPO_ID", help="upload the written folder to this Hub repo (org/name)"
    )
    publishing.add_argument(
        "--private", action="store_true", help="create the repo private (an existing one keeps its visibility)"
    )
    publishing.add_argument("--revision", help="branch to push to (created from main if missing; default main)")
    publishing.add_argument("--commit-message", help="message of the Hub commit")
    publishing.add_argument("--token", help="Hub token with write access (default: $HF_TOKEN or `hf auth login`)")
    return parser


def export_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-export",
        description="Write a saved ELMo folder (ElmoModel, ElmoForPreTraining or a fine-tuned model) in the original "
        "bilm-tf format: options.json, lm_weights.hdf5 and, with an LM softmax, softmax.hdf5 and vocab.txt.",
    )
    parser.add_argument("model_dir", metavar="MODEL_DIR", help="folder saved with save_pretrained")
    parser.add_argument("--output", required=True, help="folder to write (must not exist unless --overwrite)")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing output folder written by elmo-export (or empty)"
    )
    return parser


def publish_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-publish",
        description=PUBLISH_DESCRIPTION,
        epilog=subcommands_epilog(
            "elmo-publish",
            {"batch --input-dir DOWNLOADS --output-dir OUT": "convert every downloaded EFML or NLPL model"},
        ),
    )
    parser.add_argument("--namespace", required=True, help="Hub user or organization that receives the repos")
    parser.add_argument("--presets", nargs="+", choices=list(PRESETS), default=list(PRESETS), help="default: all")
    parser.add_argument("--work-dir", type=Path, default=Path("elmo-presets"), help="where converted folders go")
    parser.add_argument("--source-base", default=ALLENNLP_ELMO_URL, help="base URL of the originals (a mirror)")
    parser.add_argument("--cache-dir", help="where downloaded originals are kept (default: $HF_HOME/elmo-original)")
    parser.add_argument("--private", action="store_true", help="create the repos private")
    parser.add_argument("--token", help="Hub token with write access (default: $HF_TOKEN or `hf auth login`)")
    return parser


def publish_batch_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="elmo-publish batch",
        description="Convert every downloaded ELMoForManyLangs or NLPL model (ZIP or folder) in a folder into one "
        "model folder each.",
    )
    parser.add_argument("--input-dir", type=Path, required=True, help="folder of downloaded models (ZIPs, folders)")
    parser.add_argument("--output-dir", type=Path, required=True, help="where OUT/<name> folders are written")
    parser.add_argument("--verify", action="store_true", help="reload each folder and compare it with the original")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT/<name> folders elmo-convert wrote")
    return parser


def parse_convert_command_line(argv: list[str] | None) -> argparse.Namespace:
    """`elmo-convert`'s command line, checked (a source given one way, publishing flags only with --push-to-hub);
    `--help` and errors exit here. `--preset` fills in `options` and `weights`."""
    parser = convert_parser()
    args = parser.parse_args(argv)
    args.source_format = args.source_format or ("nlpl" if args.model_dir else "original")
    if args.source_format != "original":
        refused = ["--options", "--weights", "--preset"]
        refused += ["--cache-dir"] if args.source_format == "elmoformanylangs" else []  # a folder: nothing to download
        if not args.model_dir or any(getattr(args, flag[2:].replace("-", "_")) for flag in refused):
            parser.error(f"--from {args.source_format} takes --model-dir (and no {', '.join(refused)})")
    elif args.model_dir:
        parser.error("--model-dir: give --from nlpl (the default with --model-dir) or --from elmoformanylangs")
    elif args.preset:
        preset = PRESETS[args.preset]
        args.options = args.options or preset.options_url
        args.weights = args.weights or preset.weights_url
    if args.source_format == "original" and not (args.options and args.weights):
        parser.error("give --preset, both --options and --weights, or --model-dir")
    publishing = {"--private": args.private, "--revision": args.revision, "--commit-message": args.commit_message}
    given = [flag for flag, value in {**publishing, "--token": args.token}.items() if value]
    if given and not args.push_to_hub:
        parser.error(f"{', '.join(given)}: only used with --push-to-hub")
    return args


def check_publish_command_line(argv: list[str]) -> None:
    """Parse `elmo-publish`'s command line (`batch` and its flags included): `--help` and errors exit here."""
    if argv[:1] == ["batch"]:
        publish_batch_parser().parse_args(argv[1:])
    else:
        publish_parser().parse_args(argv)


def check_convert_command_line(argv: list[str]) -> None:
    """Parse `elmo-convert`'s command line: `--help` and errors exit here."""
    parse_convert_command_line(argv)


def saved_folder_problem(model_dir: str | os.PathLike) -> str | None:
    """Why `model_dir` cannot be exported (it is not a folder), or None."""
    if Path(model_dir).is_dir():
        return None
    return f"{Path(model_dir)}: not a folder (give a folder saved with save_pretrained)."


def check_export_command_line(argv: list[str]) -> None:
    """Parse `elmo-export`'s command line and check that MODEL_DIR is a folder: `--help` and errors exit here."""
    problem = saved_folder_problem(export_parser().parse_args(argv).model_dir)
    if problem is not None:
        raise ToolError(problem)
