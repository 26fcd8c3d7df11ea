"""
The CPU thread setting of a command that owns its process (`elmo-train-ner`, `elmo-train-classifier`,
`elmo-pretrain`, `elmo-embed`, `elmo-convert`), chosen before its work starts.

PyTorch runs its parallel regions on as many OpenMP threads as the CPU has cores, and its OpenMP threads spin while
they wait for each other. ELMo's work is many small regions (a time step per word), so beside another busy process a
thread that is not running holds the others up at every region: two threads on two cores, one of them taken, ran a
NER job about 5x slower than one thread. `configure_cpu_threads` measures, over a short window, how much of the CPUs
this process may run on other processes are using, and runs on the cores left over (at least one); where some
threads remain beside a busy process, they sleep instead of spinning while they wait (`OMP_WAIT_POLICY=PASSIVE`).
On an idle machine it changes nothing. A setting the user made (`OMP_NUM_THREADS`, `OMP_WAIT_POLICY`) is kept.

OpenMP reads its environment when PyTorch is first imported: called before that, the choice goes through
`OMP_NUM_THREADS` and `OMP_WAIT_POLICY` (and so also holds in the processes this one starts); called after, through
`torch.set_num_threads`, and the wait policy stays as it was.

A process that a scheduler gave a share of the machine (a Ray Serve replica's `num_cpus`) passes that share,
`reserved_cpus`: it runs on at most that many threads (the share's whole part, at least one), fewer where other
processes keep the CPUs busy, and the count is set even on an idle machine. An `OMP_NUM_THREADS` found then is the
scheduler's (Ray sets it to the share), not the user's: a caller that has a user's count sets it instead of calling.
"""

import math
import os
import sys
import time
from pathlib import Path

PROBE_SECONDS = 0.05  # how long the other processes' CPU use is measured (5 clock ticks of 10 ms on each CPU)


def configure_cpu_threads(reserved_cpus: float | None = None) -> int | None:
    """Run this process on the cores that other processes leave free (at most `reserved_cpus` threads where a
    scheduler reserved that many CPUs for it); the thread count set, or `None` when the setting is left as it is
    (without `reserved_cpus`: the machine is idle, or the user set `OMP_NUM_THREADS`)."""
    if reserved_cpus is None and "OMP_NUM_THREADS" in os.environ:
        return None
    cpus = sorted(os.sched_getaffinity(0))
    cores = physical_cores(cpus)
    most = cores if reserved_cpus is None else max(1, min(cores, math.floor(reserved_cpus)))
    threads = max(1, min(most, round(len(cpus) - busy_cpus(cpus, PROBE_SECONDS))))
    if reserved_cpus is None and threads >= cores:
        return None
    if "torch" in sys.modules:
        import torch

        torch.set_num_threads(threads)
    else:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        if 1 < threads < cores:  # beside other processes (on all the cores, OpenMP's default policy stays)
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return threads


def busy_cpus(cpus: list[int], seconds: float) -> float:
    """How many of `cpus` other processes kept busy over the next `seconds` (this process sleeps meanwhile), from
    the kernel's per-CPU time counters; 0.0 where they cannot be read."""
    before = _cpu_times(cpus)
    time.sleep(seconds)
    after = _cpu_times(cpus)
    if not before or before.keys() != after.keys():
        return 0.0
    busy = 0.0
    for cpu, (total, idle) in after.items():
        elapsed = total - before[cpu][0]
        if elapsed > 0:
            busy += 1 - (idle - before[cpu][1]) / elapsed
    return busy


def _cpu_times(cpus: list[int]) -> dict[int, tuple[int, int]]:
    """For each of `cpus`: (all clock ticks, idle and I/O-wait ticks) since boot, from /proc/stat."""
    wanted, times = {f"cpu{cpu}": cpu for cpu in cpus}, {}
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return {}
    for line in lines:
        name, *fields = line.split()
        if name in wanted:
            ticks = [int(value) for value in fields[:8]]  # user nice system idle iowait irq softirq steal
            times[wanted[name]] = (sum(ticks), ticks[3] + ticks[4])
    return times


def physical_cores(cpus: list[int]) -> int:
    """The physical cores among `cpus` (PyTorch's default thread count): hyper-threads of one core count once."""
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add((topology.joinpath("physical_package_id").read_text(), topology.joinpath("core_id").read_text()))
        except OSError:
            cores.add(cpu)
    return len(cores)
