"""`elmo-convert`: an original checkpoint (bilm-tf options JSON + HDF5 weights, local or URLs, or a preset), an NLPL
repository model or an ELMoForManyLangs model in, a Transformers folder out (`convert.py`, `nlpl.py`,
`efml_convert.py` do the work), optionally verified and pushed to the Hub."""

import sys

from ..foundation.errors import ToolError, report
from ..hub.push import check_push_target, push_folder
from ..runtime.cpu_threads import configure_cpu_threads
from .arguments import parse_convert_command_line
from .convert import convert_checkpoint
from .efml_convert import convert_efml
from .nlpl import convert_nlpl_model


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command: this process is its own
        configure_cpu_threads()
    args = parse_convert_command_line(argv)
    try:
        token = check_push_target(args.push_to_hub, args.token) if args.push_to_hub else None
        common = {"overwrite": args.overwrite, "verify": args.verify, "repo_id": args.push_to_hub}
        if args.source_format == "elmoformanylangs":
            result = convert_efml(args.model_dir, args.output, **common)
        elif args.source_format == "nlpl":
            result = convert_nlpl_model(args.model_dir, args.output, cache_dir=args.cache_dir, **common)
        else:
            result = convert_checkpoint(
                args.options, args.weights, args.output, cache_dir=args.cache_dir, preset=args.preset, **common
            )
        print(f"Wrote {result.output_dir}")
        if result.max_abs_difference is not None:
            print(f"Verification: max abs difference to the original weights = {result.max_abs_difference:.3g}")
        if args.push_to_hub:
            commit_url = push_folder(
                result.output_dir,
                args.push_to_hub,
                token=token,
                private=True if args.private else None,
                revision=args.revision,
                commit_message=args.commit_message,
            )
            print(f"Pushed to {args.push_to_hub}: {commit_url}")
    except ToolError as error:
        return report("elmo-convert", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
