"""The ceilings job of `bench_inference.py`: this machine's GEMM and bandwidth limits for the model's own products
(`worker_ceilings`, in a worker process), a setting's ceiling from them (`ceiling_tok_s`), the CPU's description and
the FLOPs per token, and the ceilings' printout (`bench_inference.py --help` describes what is measured)."""

import argparse
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

from .common import QUANTIZED_PATHS, load_model, median_range, quantized_methods


def cpu_description() -> dict[str, str]:
    """The CPU model and L3 size as `lscpu` reports them (vendor-neutral), else from /proc/cpuinfo and /sys."""
    found = {}
    try:
        listing = subprocess.run(
            ["lscpu"], capture_output=True, text=True, timeout=30, env={**os.environ, "LC_ALL": "C"}
        )
        for line in listing.stdout.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("Model name", "L3 cache", "Vendor ID") and value.strip():
                found.setdefault(key.strip(), value.strip())  # the first cluster's, on CPUs that list several
    except (OSError, subprocess.SubprocessError):
        pass
    if "Model name" not in found and Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                found["Model name"] = value.strip()
                break
    cache = Path("/sys/devices/system/cpu/cpu0/cache")
    if "L3 cache" not in found and cache.is_dir():
        for index in sorted(cache.glob("index*")):
            if (index / "level").read_text().strip() == "3":
                found["L3 cache"] = (index / "size").read_text().strip()
    return {
        "model": found.get("Model name") or platform.processor() or platform.machine(),
        "vendor": found.get("Vendor ID", "?"),
        "l3": found.get("L3 cache", "?"),
    }


def flops_per_token(config) -> dict[str, int]:
    """Multiply-adds x 2 per word, counted from the config: the LSTM layers (input-to-gate, recurrent, projection,
    both directions) and the character side (convolutions over all `max_characters_per_token` positions, highways,
    projection), as if every word went through the CNN (the model runs it once per distinct word of a batch)."""
    cells, projection = config.lstm_cell_size, config.projection_dim
    lstm = config.num_hidden_layers * 2 * 2 * (2 * projection * 4 * cells + cells * projection)
    chars, filters = config.max_characters_per_token, config.num_char_filters
    convolutions = sum(
        2 * width * config.char_embedding_dim * count * (chars - width + 1) for width, count in config.char_filters
    )
    char_side = convolutions + config.num_highway_layers * 2 * 2 * filters * filters + 2 * filters * projection
    return {"lstm": lstm, "char": char_side}


def time_ms(function, repeats: int) -> float:
    """Median wall time of `function()` in ms over `repeats` calls after one untimed call."""
    function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def worker_ceilings(args: argparse.Namespace) -> dict:
    """
    This machine's limits for the model's products (see the module docstring), with the model's own weights and the
    products its inference paths build (float32: `LstmEngine._linear_sets`; each quantization method of `--path`:
    its quantized layers' `linear_sets`): the input-to-gate product of one block, and one time step (the recurrent +
    projection products of every layer and direction in turn) at several row counts, per kind (float32, each method);
    the one-row steps of all kinds timed interleaved.
    """
    import torch

    from modeling_elmo.engine.cpu_linear import onednn_linear_applies
    from modeling_elmo.engine.lstm_engine import LstmEngine

    _, model = load_model(args.model_dir, args.threads)
    config, layers = model.config, list(model.bilm.layers)
    onednn = onednn_linear_applies(layers[0].weight_hh, torch.zeros(1))
    cells, projection = config.lstm_cell_size, config.projection_dim
    block_rows = LstmEngine.INPUT_GATE_BLOCK_ROWS
    generator = torch.Generator().manual_seed(0)
    inputs = torch.randn(2, max(block_rows, args.max_rows), projection, generator=generator)  # (2, rows, P)
    cell_outputs = torch.randn(2, args.max_rows, cells, generator=generator) * 0.5  # (2, rows, C)

    def float32_sets(products: str) -> list:
        engine = LstmEngine(products)
        # per layer: [(directions, products)]
        return [engine._linear_sets(layer, inputs, args.max_rows)[1] for layer in layers]

    def one_step(sets: list, rows: int) -> None:
        for layer_sets in sets:
            for directions, (_, recurrent, project) in layer_sets:
                recurrent(inputs[directions, :rows])
                project(cell_outputs[directions, :rows])

    def input_blocks(sets: list) -> None:
        for layer_sets in sets:
            for directions, (input_to_gates, _, _) in layer_sets:
                input_to_gates(inputs[directions, :block_rows])

    def step_times(sets: list) -> dict[int, float]:
        return {
            rows: time_ms(lambda rows=rows: one_step(sets, rows), args.repeats + (12 if rows == 1 else 4))
            for rows in grid
        }

    grid = sorted({1, 2, 4, 8, 16, 24, 32, 48, 64, args.max_rows} - {r for r in range(args.max_rows + 1, 65)})
    step_flops_per_row = len(layers) * 2 * 2 * (projection * 4 * cells + cells * projection)
    input_flops_per_row = len(layers) * 2 * 2 * projection * 4 * cells
    step_bytes = {"fp32": sum(4 * (layer.weight_hh.numel() + layer.weight_proj.numel()) for layer in layers)}
    quantized_models = {
        method: load_model(args.model_dir, args.threads, quantization=method)[1]
        for method in quantized_methods(args.path)
    }
    with torch.inference_mode():
        variants = {"oneDNN": float32_sets("onednn")} if onednn else {}
        variants["bmm"] = float32_sets("bmm")
        input_ms = {
            "fp32": min(time_ms(lambda sets=sets: input_blocks(sets), args.repeats + 2) for sets in variants.values())
        }
        times = {name: step_times(sets) for name, sets in variants.items()}
        fastest = {rows: min(variants, key=lambda name, rows=rows: times[name][rows]) for rows in grid}
        step_ms = {"fp32": {rows: times[fastest[rows]][rows] for rows in grid}}
        kinds = {"fp32": variants[fastest[1]]}
        for method, quantized_model in quantized_models.items():
            quantized_layers = list(quantized_model.bilm.layers)
            kinds[method] = [layer.linear_sets() for layer in quantized_layers]
            step_bytes[method] = sum(
                buffer.nbytes
                for layer in quantized_layers
                for name, buffer in layer.named_buffers()
                if name.startswith(("weight_hh", "weight_proj"))
            )
            input_ms[method] = time_ms(lambda sets=kinds[method]: input_blocks(sets), args.repeats + 2)
            step_ms[method] = step_times(kinds[method])
        one_row_times = {kind: [] for kind in kinds}
        for _ in range(args.repeats + 12):  # interleaved, so that all kinds see the same machine
            for kind, kind_sets in kinds.items():
                one_row_times[kind].append(time_ms(lambda sets=kind_sets: one_step(sets, 1), 1))
        one_row_ms = {kind: statistics.median(found) for kind, found in one_row_times.items()}
    return {
        "cpu": cpu_description(),
        "products": {rows: fastest[rows] for rows in grid},
        "torch": torch.__version__,
        "flops_per_token": flops_per_token(config),
        "input_block_rows": block_rows,
        "input_flops_per_row": input_flops_per_row,
        "input_gflops": {kind: input_flops_per_row * block_rows / ms / 1e6 for kind, ms in input_ms.items()},
        "step_flops_per_row": step_flops_per_row,
        "step_ms": step_ms,
        "step_gflops": {
            kind: {rows: step_flops_per_row * rows / ms / 1e6 for rows, ms in by_rows.items()}
            for kind, by_rows in step_ms.items()
        },
        "step_bytes": step_bytes,
        "one_row_step_ms": one_row_ms,
        "bandwidth_gbs": step_bytes["fp32"] / one_row_ms["fp32"] / 1e6,
    }


def interpolate(points: dict[int, float], x: int) -> float:
    """Piecewise-linear interpolation of `points` {x: y} at `x` (clamped to the measured range)."""
    xs = sorted(points)
    if x <= xs[0]:
        return points[xs[0]]
    for left, right in zip(xs, xs[1:], strict=False):
        if x <= right:
            return points[left] + (points[right] - points[left]) * (x - left) / (right - left)
    return points[xs[-1]] * x / xs[-1]


def ceiling_tok_s(ceilings: dict, sentences: list[list[str]], batch_size: int, path: str) -> tuple[float, str]:
    """
    The setting's ceiling in words/s and its kind. Batch 1: its time steps (words + 2 per sentence), each streaming
    the step's weights (float32, or the path's quantized ones) at the measured float32 GB/s. Larger batches: the time
    the measured products of the path's kind take for its batches (each step at its own row count; input-to-gate
    products at the kind's input-to-gate GEMM rate; the character side at float32's, the character CNN once per
    distinct word of a batch and for `<S>`, `</S>`, as the model runs it).
    """
    kind = path if path in QUANTIZED_PATHS else "fp32"
    words = sum(map(len, sentences))
    steps = ceilings["step_ms"][kind]
    if batch_size == 1:
        step_bytes = ceilings["step_bytes"][kind]
        seconds = sum(len(sentence) + 2 for sentence in sentences) * step_bytes / (ceilings["bandwidth_gbs"] * 1e9)
        return words / seconds, "bandwidth"
    char_rate, input_rate = ceilings["input_gflops"]["fp32"] * 1e9, ceilings["input_gflops"][kind] * 1e9
    seconds = 0.0
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start : start + batch_size]
        distinct = len({word for sentence in batch for word in sentence}) + 2
        seconds += distinct * ceilings["flops_per_token"]["char"] / char_rate
        lengths = sorted((len(sentence) + 2 for sentence in batch), reverse=True)
        seconds += sum(lengths) * ceilings["input_flops_per_row"] / input_rate
        seconds += sum(interpolate(steps, sum(n > t for n in lengths)) for t in range(lengths[0])) / 1000
    return words / seconds, "GEMM"


def print_ceilings(name: str, rounds: list[dict]) -> None:
    """One model's ceilings over the rounds: medians, with ranges where there are several rounds."""

    def show(values: list[float], digits: int = 0) -> str:
        middle, low, high = median_range(values)
        text = f"{middle:,.{digits}f}"
        return text if len(values) == 1 else f"{text} ({low:,.{digits}f}-{high:,.{digits}f})"

    first = rounds[0]
    flops = first["flops_per_token"]
    measured = first["step_gflops"]["fp32"]
    grid = [rows for rows in measured if rows in (1, 8, 32, 64) or rows == max(measured)]
    mib = {kind: count / 2**20 for kind, count in first["step_bytes"].items()}
    total, lstm, char_side = (flops["lstm"] + flops["char"]) / 1e6, flops["lstm"] / 1e6, flops["char"] / 1e6
    print(f"\n{name}: FLOP/token {total:.1f} M (LSTM {lstm:.1f} M, char side {char_side:.1f} M); "
          f"float32 products: {first['products']}")  # fmt: skip
    for kind in first["step_ms"]:
        gemm = show([r["input_gflops"][kind] for r in rounds])
        print(f"  {kind}: input-to-gate GEMM, {first['input_block_rows']} rows: {gemm} GFLOP/s")
        for rows in grid:
            gflops = [r["step_gflops"][kind][rows] for r in rounds]
            ms = [r["step_ms"][kind][rows] for r in rounds]
            print(f"  {kind}: one time step (all layers and directions), {rows} rows: {show(gflops)} GFLOP/s, "
                  f"{show(ms, 2)} ms")  # fmt: skip
    print("  weights streamed per time step: " + ", ".join(f"{kind} {size:.1f} MiB" for kind, size in mib.items())
          + "; one step at 1 row (interleaved): "
          + ", ".join(f"{kind} {show([r['one_row_step_ms'][kind] for r in rounds], 2)} ms" for kind in mib)
          + f"; float32 bandwidth {show([r['bandwidth_gbs'] for r in rounds], 1)} GB/s")  # fmt: skip
