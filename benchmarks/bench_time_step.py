"""
One direction's time step of a quantized biLM layer ('original' shapes: cell 4,096, projection 512, random weights),
with its element-wise regions as ATen operations (what the package runs, `modeling_elmo.quantization.time_steps`)
against the same regions compiled by `torch.compile` (inductor's C++ on CPUs), interleaved in one process at each row
count, and the step's two products alone. Prints the first compiled call's time (code generation and the C++ build,
or inductor's on-disk cache) and the CPU model. The figures behind "not adopted" in docs/speed.md, "The time step's
element-wise work":

    python benchmarks/bench_time_step.py [--methods int8,bf16] [--rows 1,4,16,64] [--threads 2]
"""

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from modeling_elmo.quantization import time_steps
from modeling_elmo.quantization.kernels import int8_unit_rows_product, quantize_symmetric, quantized_linear, unit_rows

CELL, PROJECTION = 4096, 512
REGIONS = ("int8_products_cell", "int8_projected_hidden", "float_products_cell")


def cpu_model() -> str:
    """`model name` of /proc/cpuinfo (empty where there is none)."""
    for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").splitlines():
        if line.startswith("model name"):
            return line.partition(":")[2].strip()
    return ""


def products(method: str) -> tuple[Callable, Callable]:
    """The recurrent and projection products of random weights as the method's time step takes them."""
    generator = torch.Generator().manual_seed(0)
    recurrent = torch.randn(4 * CELL, PROJECTION, generator=generator) * 0.05
    projection = torch.randn(PROJECTION, CELL, generator=generator) * 0.05
    if method == "int8":
        return tuple(int8_unit_rows_product(*quantize_symmetric(w, torch.float32)) for w in (recurrent, projection))
    if method == "bf16":
        return tuple(quantized_linear("bf16", w.to(torch.bfloat16), None) for w in (recurrent, projection))
    raise SystemExit(f"--methods: int8 or bf16, got {method!r}")


def use_regions(regions: dict[str, Callable]) -> None:
    """Point the time step at `regions` (it looks them up in its module at each call)."""
    for name, region in regions.items():
        setattr(time_steps, name, region)


def mean_us(call: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="int8,bf16")
    parser.add_argument("--rows", default="1,4,16,64")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    eager = {name: getattr(time_steps, name) for name in REGIONS}
    compiled = {name: torch.compile(region, dynamic=True, fullgraph=True) for name, region in eager.items()}
    print(f"CPU: {cpu_model()}; torch {torch.__version__}; {args.threads} threads")
    print("| method | rows | eager step (us) | compiled step (us) | compiled / eager time | products alone (us) |")
    print("|---|---|---|---|---|---|")
    for method in args.methods.split(","):
        recurrent, projection = products(method)
        step = time_steps.time_step(method, recurrent, projection, 3.0, 3.0)
        for rows in map(int, args.rows.split(",")):
            gates, cell = torch.randn(1, rows, 4 * CELL), torch.randn(1, rows, CELL)
            hidden = torch.randn(1, rows, PROJECTION) * 0.3
            hidden_rows = unit_rows(hidden[0])[0] if method == "int8" else hidden[0]
            cell_rows = unit_rows(cell[0].tanh())[0] if method == "int8" else cell[0].tanh()
            calls = 40 if rows == 1 else 8
            times = {"eager": [], "compiled": [], "products": []}

            def one_step(step=step, gates=gates, hidden=hidden, cell=cell) -> object:
                return step(gates, hidden, cell)

            def both_products(recurrent=recurrent, projection=projection, rows=(hidden_rows, cell_rows)) -> object:
                return recurrent(rows[0]), projection(rows[1])

            with torch.inference_mode():
                use_regions(compiled)
                start = time.perf_counter()
                one_step()
                first = time.perf_counter() - start
                for _ in range(args.rounds):
                    for kind, regions in (("eager", eager), ("compiled", compiled)):
                        use_regions(regions)
                        times[kind].append(mean_us(one_step, calls))
                    times["products"].append(mean_us(both_products, calls))
            use_regions(eager)
            found = {kind: statistics.median(values) for kind, values in times.items()}
            print(
                f"| {method} | {rows} | {found['eager']:.0f} | {found['compiled']:.0f} (first call {first:.1f} s) | "
                f"{found['compiled'] / found['eager']:.2f} | {found['products']:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
