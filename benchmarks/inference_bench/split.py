"""The split job of `bench_inference.py` (`--split`): where a call's time goes, products against other ops and the
time outside ops, under `torch.profiler` (`time_split`, run by the speed worker after its timed passes), and its
table."""

import time

from .common import QUANTIZED_PATHS

SPLIT_PATHS = ("fast", *QUANTIZED_PATHS)  # the paths whose time per call is split (--split)
SPLIT_CALLS = 4  # the first calls of a setting profiled (--split)
PRODUCT_OPS = ("mm", "linear", "matmul")  # in an op's name: a matrix product (addmm, bmm, _int_mm, int8pack_mm, ...)


def time_split(calls) -> dict[str, float]:
    """Where the time of `calls()` goes (module docstring, `--split`), in ms: its ops' own CPU time by kind under
    `torch.profiler` (`products`, `other ops`), the rest of the profiled wall time (`outside ops`), the profiled
    wall time, and the wall time of the same calls just before without the profiler."""
    from torch.profiler import ProfilerActivity, profile

    start = time.perf_counter()
    calls()
    unprofiled = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        start = time.perf_counter()
        calls()
        profiled = time.perf_counter() - start
    spent = {"products": 0.0, "other ops": 0.0}
    for event in profiler.key_averages():
        kind = "products" if any(op in event.key.lower() for op in PRODUCT_OPS) else "other ops"
        spent[kind] += event.self_cpu_time_total / 1e3  # ms
    outside = max(profiled * 1e3 - sum(spent.values()), 0.0)
    return spent | {"outside ops": outside, "profiled": profiled * 1e3, "unprofiled": unprofiled * 1e3}


def print_split(splits: list) -> None:
    print("\nWhere a call's time goes (the first calls of a setting, round 1, under torch.profiler: ops' own CPU "
          "time; ms per call; outside ops: Python between the ops and the profiler's own cost):")  # fmt: skip
    print("| model | path | batch | products | other ops | outside ops | products share | profiled call "
          "| unprofiled call |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for setting, parts in splits:
        share = parts["products"] / parts["profiled"]
        print(f"| {setting.name} | {setting.path} | {setting.label} | {parts['products']:.2f} "
              f"| {parts['other ops']:.2f} | {parts['outside ops']:.2f} | {share:.0%} | {parts['profiled']:.2f} "
              f"| {parts['unprofiled']:.2f} |")  # fmt: skip
