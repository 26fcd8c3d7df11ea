"""Convert the official English ELMo models and publish them under one Hub namespace, each with its model card;
or (`elmo-publish batch`) convert a folder of downloaded models into one folder per model, ready to push.

elmo-publish --namespace my-org [--presets small medium original original-5.5b]
    [--work-dir elmo-presets] [--private] [--token TOKEN] [--source-base URL] [--cache-dir DIR]
elmo-publish batch --input-dir DOWNLOADS --output-dir OUT [--verify] [--overwrite]

Preset `p` becomes the repo `<namespace>/elmo-<p>` (e.g. `my-org/elmo-original-5.5b`): its options and weights are
downloaded from AllenNLP (or from the same layout under `--source-base`, e.g. a mirror), converted with verification
into `<work-dir>/elmo-<p>`, checked and uploaded. Repo ids and the token are checked before anything is downloaded;
a failed preset stops the run, and running it again redoes the conversions (downloads are cached) and re-pushes.
The endpoint is `$HF_ENDPOINT` (default https://huggingface.co).

`batch`: every ZIP and folder directly in DOWNLOADS is one model (hidden entries are ignored, other files skipped
with a note): an ELMoForManyLangs model (a folder with `config.json` and `encoder.pkl`, or a ZIP holding one at its
top level or in its one top-level folder), else an NLPL vector repository model (`options.json` + `.hdf5`).
`OUT/<name>` (the entry's name without `.zip`) is written as `elmo-convert` writes a folder, all or nothing. Its card
names the language: for an NLPL model from its `meta.json`, else (and for ELMoForManyLangs always) from the entry's
name (`efml_language`: NLPL id, ISO 639 code, zht/zhs or English name); a model whose language cannot be told fails.
A model that fails is reported by name and the others still convert; the exit status is 1 if any failed (or none
was found).
"""

import sys
import tempfile
from pathlib import Path

from ..formats.efml import EfmlFormatError
from ..formats.nlpl import EFML_MARKERS, NlplModelError, efml_archive_folder, extract_efml_archive
from ..formats.original_checkpoint import OriginalCheckpointError
from ..foundation.errors import ToolError, one_line, report
from ..foundation.output_folder import reason_of
from ..hub.model_card import ModelCardError
from ..hub.push import check_push_target, push_folder
from .arguments import publish_batch_parser, publish_parser
from .convert import ConversionError, ConversionResult, convert_checkpoint, converted_output_claimed
from .efml_convert import convert_efml
from .nlpl import convert_nlpl_model
from .presets import ALLENNLP_ELMO_URL, PRESETS, efml_language, efml_source_facts


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


def find_downloads(input_dir: Path) -> tuple[list[Path], list[str]]:
    """The models in `input_dir` (its ZIPs and folders, by name) and the names of the other entries."""
    try:
        entries = sorted(path for path in input_dir.iterdir() if not path.name.startswith("."))
    except OSError as error:
        raise ConversionError(f"Cannot list --input-dir {input_dir}: {reason_of(error, with_file=False)}.") from error
    models = [path for path in entries if path.is_dir() or (path.is_file() and path.suffix.lower() == ".zip")]
    return models, [path.name for path in entries if path not in models]


def convert_download(path: Path, output: Path, *, verify: bool, overwrite: bool) -> ConversionResult:
    """Convert one downloaded model (see the module docstring) into `output`."""
    language = efml_language(path.name)
    is_folder = path.is_dir()
    if (is_folder and all((path / name).is_file() for name in EFML_MARKERS)) or (
        not is_folder and efml_archive_folder(path) is not None
    ):
        if language is None:
            raise ConversionError(
                f"{path}: cannot tell the ELMoForManyLangs model's language from its name; name it by its NLPL id, "
                "ISO 639 code or language (the table in docs/conversion-sources.md)."
            )
        options = dict(overwrite=overwrite, verify=verify, facts=efml_source_facts(language))
        if is_folder:
            return convert_efml(path, output, **options)
        with (
            converted_output_claimed(output, overwrite, (str(path),)),  # before extracting a large archive for nothing
            tempfile.TemporaryDirectory(prefix="elmo-efml-") as work,
        ):
            return convert_efml(extract_efml_archive(path, Path(work)), output, archive=(str(path), path), **options)
    return convert_nlpl_model(
        str(path),
        output,
        overwrite=overwrite,
        verify=verify,
        fallback_language=language.code if language else None,
        language_required=True,
    )


def convert_downloads(input_dir: Path, output_dir: Path, *, verify: bool = False, overwrite: bool = False) -> dict:
    """Convert every model in `input_dir` into `output_dir/<name>` (see the module docstring); returns name -> None
    when it converted, else the error message."""
    resolved_in, resolved_out = input_dir.resolve(), output_dir.resolve()
    if resolved_out == resolved_in or resolved_in in resolved_out.parents:
        raise ConversionError(f"--output-dir {output_dir} is inside --input-dir {input_dir}; choose a folder outside.")
    models, skipped = find_downloads(input_dir)
    for name in skipped:
        print(f"{name}: skipped (not a folder or a .zip)")
    if not models:
        raise ConversionError(f"No models (folders or .zip files) in --input-dir {input_dir}.")
    outcomes: dict[str, str | None] = {}
    for path in models:
        name = path.name[: -len(".zip")] if path.name.lower().endswith(".zip") else path.name
        if name in outcomes:
            outcomes[path.name] = f"its output name {name!r} is taken by another entry"
            print(f"{path.name}: error: {outcomes[path.name]}", file=sys.stderr)
            continue
        try:
            result = convert_download(path, output_dir / name, verify=verify, overwrite=overwrite)
        except (ConversionError, OriginalCheckpointError, EfmlFormatError, NlplModelError, ModelCardError) as error:
            outcomes[name] = str(error)
            print(f"{path.name}: error: {error}", file=sys.stderr)
            continue
        except Exception as error:  # a failure nobody foresaw stops this model, not the batch
            outcomes[name] = f"unexpected {type(error).__name__}: {one_line(error, first=True)}"
            print(f"{path.name}: error: {outcomes[name]}", file=sys.stderr)
            continue
        outcomes[name] = None
        checked = (
            f", max abs difference {result.max_abs_difference:.3g}" if result.max_abs_difference is not None else ""
        )
        print(f"{path.name}: converted to {result.output_dir}{checked}")
    return outcomes


def batch_main(argv: list[str]) -> int:
    args = publish_batch_parser().parse_args(argv)
    try:
        outcomes = convert_downloads(args.input_dir, args.output_dir, verify=args.verify, overwrite=args.overwrite)
    except ToolError as error:
        return report("elmo-publish batch", error)
    failed = [name for name, problem in outcomes.items() if problem is not None]
    print(f"Converted {len(outcomes) - len(failed)} of {len(outcomes)} models into {args.output_dir}")
    if failed:
        print(f"elmo-publish batch: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["batch"]:
        return batch_main(argv[1:])
    args = publish_parser().parse_args(argv)
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
    except ToolError as error:
        return report("elmo-publish", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
