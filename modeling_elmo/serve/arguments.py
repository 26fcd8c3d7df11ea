"""The command line of `elmo serve` (`elmo-serve`): a parser that imports neither torch nor the web libraries, so
that `--help` and argument errors answer at once, and the `ServeSettings` it gives."""

import argparse

from ..commands.arguments import DefaultsSayWhatHappens, OneLineErrors
from ..foundation.checks import integer_flag
from ..foundation.errors import command_as_typed
from ..foundation.model_location import NO_SUCH_FOLDER, missing_model_folder
from ..quantization.methods import METHODS
from .protocol import BODY_BYTES_PER_WORD, Limits
from .settings import (
    DEFAULT_MAX_BATCH_ROWS,
    DEFAULT_MAX_BATCH_WORDS,
    DEFAULT_MAX_QUEUE,
    DEFAULT_WORD_CACHE,
    ServeSettings,
)

PROG = "elmo-serve"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000
LOG_LEVELS = ("debug", "info", "warning", "error")


class ServeParser(OneLineErrors, argparse.ArgumentParser):
    pass


def build_parser() -> ServeParser:
    defaults = Limits()
    parser = ServeParser(
        prog=command_as_typed(PROG),
        description="Serve an ELMo model over HTTP: OpenAI's POST /v1/embeddings (unit sentence vectors), "
        "POST /v1/word-embeddings (each word's layers), GET /v1/models, GET /health, GET /metrics (docs/serving.md).",
        formatter_class=DefaultsSayWhatHappens,
    )
    parser.add_argument("model", metavar="MODEL", help="an ELMo folder or Hub id 'namespace/name'")
    parser.add_argument("--host", default=DEFAULT_HOST, help="the address to listen on (0.0.0.0: every interface)")
    parser.add_argument("--port", type=integer_flag(1, 65535), default=DEFAULT_PORT, help="port")
    parser.add_argument("--served-model-name", help="the `model` the responses give (default: the folder's name)")
    parser.add_argument("--device", default="cpu", help="a torch device: cpu, cuda, cuda:1")
    parser.add_argument(
        "--max-batch-rows",
        type=integer_flag(1),
        default=DEFAULT_MAX_BATCH_ROWS,
        help="inputs running on the model at once (each joins at the next time step)",
    )
    parser.add_argument(
        "--max-batch-words",
        type=integer_flag(1),
        default=DEFAULT_MAX_BATCH_WORDS,
        help="words of the inputs running at once (a longer input runs alone)",
    )
    parser.add_argument(
        "--max-queue", type=integer_flag(1), default=DEFAULT_MAX_QUEUE, help="inputs queued or running; more get 429"
    )
    parser.add_argument(
        "--max-body-bytes",
        type=integer_flag(1),
        help=f"bytes of a request body; more get 413 (default: --max-inputs x --max-words x {BODY_BYTES_PER_WORD})",
    )
    parser.add_argument(
        "--max-inputs", type=integer_flag(1), default=defaults.inputs, help="inputs of a request; more get 413"
    )
    parser.add_argument(
        "--max-words", type=integer_flag(1), default=defaults.words_per_input, help="words of one input; more get 413"
    )
    parser.add_argument(
        "--max-response-bytes",
        type=integer_flag(1),
        default=defaults.response_bytes,
        help="bytes a response may weigh (estimated before any model work); more get 413",
    )
    parser.add_argument(
        "--word-cache",
        type=integer_flag(0),
        default=DEFAULT_WORD_CACHE,
        help="words kept in the character CNN's cache (0: none)",
    )
    parser.add_argument(
        "--quantization",
        choices=("none", *METHODS),
        default="none",
        help="the biLM's weights quantized on loading (CPU, a float32 folder; not exact, see docs/speed.md); "
        "none: the folder as saved",
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="info: one line per request")
    return parser


def parse_command_line(argv: list[str]) -> tuple[ServeSettings, argparse.Namespace]:
    """The settings and the server's own arguments (host, port, log level) of `argv`; errors exit here (status 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if missing_model_folder(args.model):
        parser.error(f"MODEL {args.model!r}: {NO_SUCH_FOLDER}")
    if args.max_inputs > args.max_queue:
        parser.error(f"--max-inputs {args.max_inputs} is more than --max-queue {args.max_queue}: no such request fits")
    if args.quantization != "none" and args.device.split(":")[0] != "cpu":
        parser.error(f"--quantization {args.quantization} runs on the CPU: use --device cpu (got {args.device})")
    same_names = (
        "model",
        "served_model_name",
        "device",
        "word_cache",
        "max_batch_rows",
        "max_batch_words",
        "max_queue",
    )
    limits = Limits(args.max_body_bytes, args.max_inputs, args.max_words, args.max_response_bytes)
    quantization = None if args.quantization == "none" else args.quantization
    settings = ServeSettings(
        **{name: getattr(args, name) for name in same_names}, limits=limits, quantization=quantization
    )
    return settings, args


def check_serve_command_line(argv: list[str]) -> None:
    """`elmo serve`'s check before torch is imported: `--help` and argument errors exit here."""
    parse_command_line(argv)
