"""Convert the official English ELMo models and publish them under one Hub namespace, each with its model card.

elmo-publish --namespace my-org [--presets small medium original original-5.5b]
    [--work-dir elmo-presets] [--private] [--token TOKEN] [--source-base URL] [--cache-dir DIR]

Preset `p` becomes the repo `<namespace>/elmo-<p>` (e.g. `my-org/elmo-original-5.5b`): its options and weights are
downloaded from AllenNLP (or from the same layout under `--source-base`, e.g. a mirror), converted with verification
into `<work-dir>/elmo-<p>`, checked and uploaded. Repo ids and the token are checked before anything is downloaded;
a failed preset stops the run, and running it again redoes the conversions (downloads are cached) and re-pushes.
The endpoint is `$HF_ENDPOINT` (default https://huggingface.co).
"""

import argparse
import sys
from pathlib import Path

from ..hub.model_card import ModelCardError
from ..hub.push import HubError, check_push_target, push_folder
from .convert import ConversionError, convert_checkpoint
from .original_checkpoint import OriginalCheckpointError
from .presets import ALLENNLP_ELMO_URL, PRESETS


def preset_repo_id(namespace: str, preset: str) -> str:
    return f"{namespace}/elmo-{preset}"


def publish_presets(
    namespace: str,
    presets: list[str],
    work_dir: Path,
    *,
    source_base: str = ALLENNLP_ELMO_URL,
    token: str | None = None,
    private: bool | None = None,
    cache_dir: str | None = None,
) -> dict[str, str]:
    """Convert and push each preset; returns repo id -> commit URL."""
    repo_ids = {preset: preset_repo_id(namespace, preset) for preset in presets}
    for repo_id in repo_ids.values():
        token = check_push_target(repo_id, token)
    commits = {}
    for preset, repo_id in repo_ids.items():
        options, weights = PRESETS[preset].source_urls(source_base)
        result = convert_checkpoint(
            options,
            weights,
            work_dir / f"elmo-{preset}",
            overwrite=True,
            verify=True,
            cache_dir=cache_dir,
            preset=preset,
            repo_id=repo_id,
        )
        print(f"{preset}: converted, max abs difference to the original {result.max_abs_difference:.3g}")
        commits[repo_id] = push_folder(
            result.output_dir,
            repo_id,
            token=token,
            private=private,
            commit_message=f"ELMo {preset}, converted from {options}",
        )
        print(f"{preset}: pushed to {repo_id}: {commits[repo_id]}")
    return commits


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--namespace", required=True, help="Hub user or organization that receives the repos")
    parser.add_argument("--presets", nargs="+", choices=list(PRESETS), default=list(PRESETS), help="default: all")
    parser.add_argument("--work-dir", type=Path, default=Path("elmo-presets"), help="where converted folders go")
    parser.add_argument("--source-base", default=ALLENNLP_ELMO_URL, help="base URL of the originals (a mirror)")
    parser.add_argument("--cache-dir", help="where downloaded originals are kept (default: $HF_HOME/elmo-original)")
    parser.add_argument("--private", action="store_true", help="create the repos private")
    parser.add_argument("--token", help="Hub token with write access (default: $HF_TOKEN or `hf auth login`)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        publish_presets(
            args.namespace,
            list(dict.fromkeys(args.presets)),
            args.work_dir,
            source_base=args.source_base,
            token=args.token,
            private=True if args.private else None,
            cache_dir=args.cache_dir,
        )
    except (ConversionError, OriginalCheckpointError, HubError, ModelCardError) as error:
        print(f"elmo-publish: error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
