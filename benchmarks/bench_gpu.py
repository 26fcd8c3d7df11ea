"""
Tokens/s of the biLM on a CUDA GPU at batch 1, 64 and 256, side by side in one run: the implementations "eager",
"triton" (float32), "triton_tf32" and "triton_bf16" of `modeling_elmo`, and AllenNLP 2.10.1's `_ElmoBiLm`; each
figure with its share of the GPU's roofline and the max abs error of its layers against "reference" (float32, the
same inputs, the batch-64 batch). Writes `bench_gpu.json` and `bench_gpu.md` (a table) into `--out-dir`.

    python benchmarks/bench_gpu.py --out-dir OUT [--allennlp allennlp-2.10.1-py3-none-any.whl] [--quick]
    python benchmarks/bench_gpu.py --dry-run --out-dir OUT   # tiny model on the CPU, "eager" only: tests the script

Model: 'original' (2 x 4096 cells, 512 projection, the 2048-filter CNN) with random weights of the original's
scales (`conversion.testing_utils`), written in the original format (AllenNLP reads those files) and converted.
Inputs: synthetic sentences (seeded; 11 to 43 words, 27 on average; words of 1 to 12 letters), so that nothing
needs downloading on the device machine. Timed: the model's call on character ids already on the device, stateless,
`torch.inference_mode()`, `torch.cuda.synchronize()` after each pass; one untimed pass first (Triton compiles
there), then passes until the setting's seconds (`--seconds`, 4 with `--quick`) are spent (at least 2); the median
pass. A whole run keeps to `--budget` seconds (420): settings that would start after it are skipped, with the reason.

Roofline (`roofline_tokens_per_s`): per time step the recurrent and projection weights of both directions and all
layers are read once (`step_weight_bytes`; 168 MB in float32 for 'original', half in bf16) and each token costs
`lstm_flops_per_token` (151 MFLOP for 'original'), so a batch of B rows runs at most
min(B * bandwidth / step_weight_bytes, peak_flops / lstm_flops_per_token) packed tokens/s, times the share of
words among packed tokens (each sentence adds `<S>` and `</S>`). Peak figures by GPU name (`GPU_PEAKS`: H100
SXM/PCIe, H200, A100); the peak is fp32 for "eager", "triton" and AllenNLP, TF32 for "triton_tf32", bf16 for
"triton_bf16". AllenNLP is given as its wheel or unpacked package (`--allennlp`; the device machine cannot
download): its ELMo modules import without AllenNLP's dependencies (`import_allennlp_elmo`); without it, it is
skipped with the reason.
"""

import argparse
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modeling_elmo import ElmoModel  # noqa: E402
from modeling_elmo.character_ids import word_to_char_ids  # noqa: E402
from modeling_elmo.conversion.convert import convert_checkpoint  # noqa: E402
from modeling_elmo.conversion.testing_utils import ARCHITECTURES, write_random_original_checkpoint  # noqa: E402
from modeling_elmo.tokenization_elmo import char_ids_tensor  # noqa: E402

MODES = ("eager", "triton", "triton_tf32", "triton_bf16", "allennlp")
PRECISION = {"eager": "fp32", "triton": "fp32", "triton_tf32": "tf32", "triton_bf16": "bf16", "allennlp": "fp32"}
# (bandwidth B/s, {precision: dense peak FLOP/s}) by a part of the GPU's name, the most specific first
GPU_PEAKS = (
    ("H200", 4.8e12, {"fp32": 67e12, "tf32": 495e12, "bf16": 990e12}),
    ("H100 PCIe", 2.0e12, {"fp32": 51e12, "tf32": 378e12, "bf16": 756e12}),
    ("H100", 3.35e12, {"fp32": 60e12, "tf32": 495e12, "bf16": 990e12}),  # SXM (HBM3), production-facts.md
    ("A100-SXM4-80GB", 2.04e12, {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12}),
    ("A100", 1.55e12, {"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12}),
)
SENTENCES = 512  # of the synthetic corpus; a pass runs its first `sentences_per_pass(batch_size)`
BATCH_ONE_SENTENCES = 24


def synthetic_sentences(count: int, seed: int = 0) -> list[list[str]]:
    """`count` sentences of 11 to 43 words (27 on average) drawn from 5,000 random words of 1 to 12 letters."""
    generator = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(generator.choices(letters, k=generator.randint(1, 12))) for _ in range(5000)]
    return [generator.choices(words, k=generator.randint(11, 43)) for _ in range(count)]


def char_ids(sentences: list[list[str]], width: int) -> torch.Tensor:
    """Right-padded character ids (batch, max_words, `width`)."""
    return char_ids_tensor(sentences, width, lambda word: word_to_char_ids(word, width))


def roofline(config, device_name: str) -> dict:
    """The GPU's peaks and the model's per-step bytes and per-token FLOPs (see the module docstring); `gpu` is None
    for a device without known peaks."""
    cell, proj, layers = config.lstm_cell_size, config.projection_dim, config.num_hidden_layers
    step_parameters = 2 * layers * (proj * 4 * cell + cell * proj)  # recurrent + projection, both directions
    flops = 2 * layers * 2 * (proj * 4 * cell + proj * 4 * cell + cell * proj)  # input, recurrent, projection
    found = next((entry for entry in GPU_PEAKS if entry[0] in device_name), None)
    return {
        "gpu": found[0] if found else None,
        "bandwidth_bytes_per_s": found[1] if found else None,
        "peak_flops_per_s": found[2] if found else None,
        "step_weight_bytes": {"fp32": 4 * step_parameters, "tf32": 4 * step_parameters, "bf16": 2 * step_parameters},
        "lstm_flops_per_token": flops,
    }


def ceiling(peaks: dict, precision: str, batch_size: int, word_share: float) -> tuple[float | None, str | None]:
    """The roofline's words/s for a batch of `batch_size` rows in `precision`, and what bounds it."""
    if peaks["gpu"] is None:
        return None, None
    bandwidth = batch_size * peaks["bandwidth_bytes_per_s"] / peaks["step_weight_bytes"][precision]
    compute = peaks["peak_flops_per_s"][precision] / peaks["lstm_flops_per_token"]
    return min(bandwidth, compute) * word_share, "bandwidth" if bandwidth < compute else "compute"


class _StandIn(types.ModuleType):
    """A module standing in for one that AllenNLP imports but its ELMo never uses: every attribute is a class."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (), {"__init__": lambda self, *args, **kwargs: None})
        setattr(self, name, value)
        return value


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of `roots` (and their submodules) give `_StandIn` modules."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = roots

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandIn(spec.name)

    def exec_module(self, module) -> None:
        module.__path__ = []


def import_allennlp_elmo(location: Path) -> types.ModuleType:
    """
    `allennlp.modules.elmo` of AllenNLP 2.10.1 from its wheel or the folder holding its `allennlp` package, without
    its dependencies: the package `__init__`s of `allennlp`, `allennlp.modules` and `allennlp.data` (which import
    every model) are skipped, `allennlp.common.push_to_hf` and the missing ones of cached_path, spaCy, lmdb, dill and
    base58 stand in as empty modules, and `cached_path` reads local files as they are.
    """
    sys.path.insert(0, str(location))
    spec = importlib.util.find_spec("allennlp")
    if spec is None or spec.origin is None:
        raise ImportError(f"no allennlp package in {location}")
    missing = tuple(name for name in ("cached_path", "spacy", "lmdb", "dill", "base58") if not _importable(name))
    sys.meta_path.append(_StandInFinder(missing))
    root = os.path.dirname(spec.origin)
    for name, folder in (
        ("allennlp", root),
        ("allennlp.modules", f"{root}/modules"),
        ("allennlp.data", f"{root}/data"),
    ):
        package = types.ModuleType(name)
        package.__path__ = [folder]
        sys.modules[name] = package
    sys.modules["allennlp.common.push_to_hf"] = _StandIn("allennlp.common.push_to_hf")
    elmo = importlib.import_module("allennlp.modules.elmo")
    if "cached_path" in missing:
        for name in ("allennlp.modules.elmo", "allennlp.modules.elmo_lstm"):
            sys.modules[name].cached_path = lambda path, *args, **kwargs: str(path)
    return elmo


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_passes(run_pass, device: torch.device, seconds: float, deadline: float) -> list[float]:
    """One untimed pass, then timed passes until `seconds` are spent (at least 2, none past `deadline` after 2)."""
    run_pass()
    synchronize(device)
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < 2 or (time.perf_counter() - started < seconds and time.perf_counter() < deadline):
        start = time.perf_counter()
        run_pass()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


class Runner:
    """Calls of one mode on batches of character ids: ours (a registered implementation) or AllenNLP's biLM, which
    reads the same ids (`word_to_char_ids` gives AllenNLP's `batch_to_ids` ids)."""

    def __init__(self, mode: str, model: ElmoModel, allennlp_bilm=None) -> None:
        self.mode, self.model, self.allennlp_bilm = mode, model, allennlp_bilm
        if mode != "allennlp":
            model.set_implementation(mode)  # ValueError: not registered, or not for this device

    def layers(self, ids: torch.Tensor) -> torch.Tensor:
        """All layers (num_layers + 1, batch, words, 2 * projection_dim), no boundary tokens, zero at padding."""
        if self.mode != "allennlp":
            return torch.stack(self.model(ids, output_hidden_states=True).hidden_states)
        self.allennlp_bilm._elmo_lstm.reset_states()  # stateless, as ours
        output = self.allennlp_bilm(ids)
        mask = (ids > 0).any(dim=-1).unsqueeze(-1)
        return torch.stack([torch.where(mask, layer[:, 1:-1], 0.0) for layer in output["activations"]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out-dir", type=Path, required=True, help="where bench_gpu.json and bench_gpu.md go")
    parser.add_argument("--allennlp", type=Path, help="AllenNLP 2.10.1's wheel, or the folder holding `allennlp/`")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--batch-sizes", default="1,64,256")
    parser.add_argument("--seconds", type=float, default=10.0, help="timed seconds per setting (default 10)")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for the whole run (default 420)")
    parser.add_argument("--quick", action="store_true", help="4 timed seconds per setting")
    parser.add_argument(
        "--dry-run", action="store_true", help="tiny model on the CPU, 'eager', batches 1 and 2, 3 sentences"
    )
    parser.add_argument("--model-dir", type=Path, help="work folder for the random checkpoint (default: a temp dir)")
    args = parser.parse_args(argv)
    deadline = time.perf_counter() + args.budget
    modes = [mode.strip() for mode in args.modes.split(",") if mode.strip()]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        parser.error(f"--modes: unknown {', '.join(unknown)}; known: {', '.join(MODES)}")
    try:
        batch_sizes = [int(size) for size in args.batch_sizes.split(",")]
    except ValueError:
        parser.error(f"--batch-sizes must be comma-separated integers, got {args.batch_sizes!r}")
    if any(size < 1 for size in batch_sizes):
        parser.error(f"--batch-sizes must be positive, got {args.batch_sizes!r}")
    if args.allennlp is not None and not args.allennlp.exists():
        parser.error(f"--allennlp: {args.allennlp} does not exist")
    if args.dry_run:
        device, architecture, seconds = torch.device("cpu"), "tiny", 0.2
        modes, batch_sizes = [mode for mode in modes if mode == "eager"] or ["eager"], [1, 2]
    elif not torch.cuda.is_available():
        print("bench_gpu.py: no CUDA GPU here (torch.cuda.is_available() is False); --dry-run runs on the CPU.")
        return 2
    else:
        device, architecture, seconds = torch.device("cuda"), "original", 4.0 if args.quick else args.seconds
    args.out_dir.mkdir(parents=True, exist_ok=True)

    with contextlib.ExitStack() as stack:
        work = args.model_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-gpu-")))
        options, weights = write_random_original_checkpoint(work / "original", ARCHITECTURES[architecture], seed=0)
        convert_checkpoint(str(options), str(weights), work / "hf", overwrite=True)
        model = ElmoModel.from_pretrained(work / "hf").to(device).eval()
        results, report = run_settings(args, model, options, weights, modes, batch_sizes, device, seconds, deadline)
    write_outputs(args.out_dir, report | {"results": results})
    return 0


def run_settings(args, model, options, weights, modes, batch_sizes, device, seconds, deadline):
    """Every (mode, batch size) setting: its figures, or the reason it was skipped."""
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    peaks = roofline(model.config, name)
    corpus = synthetic_sentences(3 if args.dry_run else SENTENCES)
    width = model.config.input_ids_width
    accuracy_rows = min(64, len(corpus))
    accuracy_ids = char_ids(corpus[:accuracy_rows], width).to(device)
    with torch.inference_mode():
        model.set_implementation("reference")
        reference = torch.stack(model(accuracy_ids, output_hidden_states=True).hidden_states)
    allennlp_bilm, allennlp_skip = None, None
    if "allennlp" in modes:
        if args.allennlp is None:
            allennlp_skip = "no --allennlp given (AllenNLP 2.10.1's wheel or unpacked package)"
        else:
            try:
                elmo = import_allennlp_elmo(args.allennlp)
                allennlp_bilm = elmo._ElmoBiLm(str(options), str(weights)).to(device).eval()
            except Exception as error:  # reported, the other modes still run
                allennlp_skip = f"AllenNLP did not load: {type(error).__name__}: {error}"
    results = []
    for mode in modes:
        skip = allennlp_skip if mode == "allennlp" else None
        runner = None
        if skip is None:
            try:
                runner = Runner(mode, model, allennlp_bilm)
            except ValueError as error:
                skip = str(error)
        error = None
        if runner is not None:
            with torch.inference_mode():
                error = float((runner.layers(accuracy_ids) - reference).abs().max())
        for batch_size in batch_sizes:
            result = {"mode": mode, "batch_size": batch_size, "precision": PRECISION[mode]}
            if skip is None and time.perf_counter() + seconds > deadline:
                skip = f"the run's budget of {args.budget:.0f} s was spent"
            if skip is not None:
                results.append(result | {"skipped": skip})
                print(f"{mode:>12} batch {batch_size:>3}: skipped ({skip})", flush=True)
                continue
            sentences = corpus[: sentences_per_pass(batch_size)]
            batches = [
                char_ids(sentences[i : i + batch_size], width).to(device) for i in range(0, len(sentences), batch_size)
            ]

            def run_pass(runner: Runner = runner, batches: list[torch.Tensor] = batches) -> None:
                with torch.inference_mode():
                    for ids in batches:
                        runner.layers(ids)

            times = time_passes(run_pass, device, seconds, deadline)
            words = sum(map(len, sentences))
            rate = words / statistics.median(times)
            word_share = words / (words + 2 * len(sentences))
            top, bound = ceiling(peaks, PRECISION[mode], batch_size, word_share)
            result |= {
                "words": words,
                "passes": len(times),
                "pass_seconds": [round(value, 4) for value in times],
                "tokens_per_s": round(rate, 1),
                "roofline_tokens_per_s": round(top) if top else None,
                "roofline_bound": bound,
                "roofline_share": round(rate / top, 4) if top else None,
                "max_abs_error_vs_reference": error,
            }
            results.append(result)
            share = f"{rate / top:.1%} of {top:,.0f} ({bound})" if top else "no roofline for this device"
            print(f"{mode:>12} batch {batch_size:>3}: {rate:,.0f} words/s, {share}, error {error:.2e}", flush=True)
    report = {
        "device": name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": _version("triton"),
        "model": f"{'tiny' if args.dry_run else 'original'} (random weights, seed 0)",
        "corpus": "synthetic: seeded, 11-43 words a sentence",
        "accuracy_batch": f"the first {accuracy_rows} sentences, all layers, against 'reference' (float32)",
        "roofline": peaks,
        "timing": f"median pass after one untimed pass, {seconds} s per setting, inference_mode, stateless",
    }
    return results, report


def sentences_per_pass(batch_size: int) -> int:
    """A timed pass: 24 sentences at batch 1, else two batches up to 256 sentences (one batch beyond)."""
    return BATCH_ONE_SENTENCES if batch_size == 1 else max(batch_size, min(2 * batch_size, 256))


def _version(name: str) -> str | None:
    try:
        return importlib.import_module(name).__version__
    except ImportError:
        return None


def write_outputs(folder: Path, report: dict) -> None:
    """`bench_gpu.json` and `bench_gpu.md`, each written to a temporary name first and then renamed."""
    lines = [
        f"GPU: {report['device']} (torch {report['torch']}, CUDA {report['cuda']}, Triton {report['triton']}); "
        f"model {report['model']}; {report['timing']}.",
        "",
        "| mode | batch | words/s | roofline words/s (bound) | share of roofline | max abs error vs reference |",
        "|---|---|---|---|---|---|",
    ]
    for result in report["results"]:
        if "skipped" in result:
            lines.append(f"| {result['mode']} | {result['batch_size']} | skipped: {result['skipped']} | | | |")
            continue
        top = result["roofline_tokens_per_s"]
        lines.append(
            f"| {result['mode']} | {result['batch_size']} | {result['tokens_per_s']:,.0f} | "
            + (f"{top:,} ({result['roofline_bound']}) | {result['roofline_share']:.1%}" if top else "n/a | n/a")
            + f" | {result['max_abs_error_vs_reference']:.2e} |"
        )
    for name, text in (("bench_gpu.json", json.dumps(report, indent=1)), ("bench_gpu.md", "\n".join(lines) + "\n")):
        partial = folder / f"{name}.partial"
        partial.write_text(text)
        partial.replace(folder / name)
    print("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
