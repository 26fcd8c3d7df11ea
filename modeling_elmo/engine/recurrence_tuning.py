"""
Opt-in run-time choices for the biLM's inference engine (`lstm_engine`), for callers that own their process (such
as `elmo-embed`): which products compute the time steps (`products="auto"`), and how many threads run a call and
each block of its time steps (`threads="auto"`).

A time step is a handful of small operations (two matrix products, a few element-wise ones), and a sentence has one
per word, so each of them pays the fixed costs of a parallel region. How much threads help depends on the model's
shapes, on the CPU and on what else the machine is doing: beside a busy process, OpenMP threads waiting for each
other at every parallel region can make a call several times slower than one thread, while on an idle machine more
threads are faster. Neither a fixed count nor a rule by shape is right in both cases, so the count is chosen online
(`ThreadCountChooser`), from the measured time of the work itself, and only for work whose results do not depend on
it (`same_results_at`). The step products ("packed" oneDNN weights or `bmm`) are chosen once per process and shape by
timing a few steps of the recurrence with each (`choose_step_products`).

What stays process-wide, and why: the thread count itself (torch has one per process, set only under
`thread_setting.THREAD_SETTING`), the chooser's measurements (`THREAD_CHOOSER`: the load of other processes it
follows is the machine's, and every model of the process runs beside it), and what was measured or probed once per
shape (`_STEP_PRODUCTS_CHOICES`, `_SAME_RESULTS`: facts of this CPU and PyTorch build, the same for every model of a
shape). All of it is read and written under `THREAD_SETTING`, as is every block run at a chosen count, so Python
threads that use it at once take turns and the caller's count is the one it set.
"""

import contextlib
import math
import time
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field

import torch

from .thread_setting import THREAD_SETTING, num_threads


def rows_bucket(rows: int) -> int:
    """The power of two at or above `rows` (>= 1): steps with similar row counts share their measurements."""
    return 1 << max(0, math.ceil(math.log2(max(rows, 1))))


_STEP_PRODUCTS_CHOICES: dict[Hashable, str] = {}
# a candidate other than the first is taken only if one of its steps takes less than this fraction of the first's
STEP_PRODUCTS_MARGIN = 0.9
STEP_PRODUCTS_REPEATS = 3


def choose_step_products(key: Hashable, candidates: Callable[[], dict[str, Callable[[], object]]]) -> str:
    """
    The name of the fastest of `candidates()` (callables running a few time steps), timed once per process, `key`
    and thread setting, at each count of `thread_counts(torch.get_num_threads())`: each runs once untimed per count,
    then `STEP_PRODUCTS_REPEATS` times interleaved, and a candidate's time is its best at its best count (the
    thread chooser then runs it at that count; on a busy machine the one-thread times decide, as they would in use).
    The first candidate is the preferred one: another is chosen only if it is clearly faster
    (`STEP_PRODUCTS_MARGIN`). The same measurement also decides for the smaller thread settings whose counts it
    timed (1 thread, where the thread chooser runs a call on one), so they are not measured again.
    """
    with THREAD_SETTING:
        available = torch.get_num_threads()
        if (key, available) not in _STEP_PRODUCTS_CHOICES:
            _time_step_products(key, candidates(), available)
        return _STEP_PRODUCTS_CHOICES[key, available]


def _time_step_products(key: Hashable, candidates: dict[str, Callable[[], object]], available: int) -> None:
    """Time `candidates` at each count of `thread_counts(available)`; record the choices (`choose_step_products`)."""
    counts = thread_counts(available)
    seconds = {count: dict.fromkeys(candidates, math.inf) for count in counts}  # best time per count and candidate
    with torch.inference_mode():
        for count in counts:
            with num_threads(count):
                for step in candidates.values():
                    step()
                for _ in range(STEP_PRODUCTS_REPEATS):
                    for name, step in candidates.items():
                        start = time.perf_counter()
                        step()
                        seconds[count][name] = min(seconds[count][name], time.perf_counter() - start)
    for setting in counts:
        if set(thread_counts(setting)) <= set(counts):
            best = {name: min(seconds[count][name] for count in thread_counts(setting)) for name in candidates}
            _STEP_PRODUCTS_CHOICES.setdefault((key, setting), _clearly_fastest(best))


def _clearly_fastest(seconds: dict[str, float]) -> str:
    """The fastest of `seconds` (by name) if it beats the first by `STEP_PRODUCTS_MARGIN`, otherwise the first."""
    preferred = next(iter(seconds))
    fastest = min(seconds, key=seconds.__getitem__)
    return fastest if seconds[fastest] < STEP_PRODUCTS_MARGIN * seconds[preferred] else preferred


def thread_counts(available: int) -> tuple[int, ...]:
    """The counts the chooser tries with `available` threads set: all of them, half of them (from 4), one."""
    return tuple(sorted({available, max(1, available // 2) if available >= 4 else available, 1}, reverse=True))


@dataclass
class _ThreadCountStats:
    """What one kind of block (`ThreadCountChooser` key) has measured: seconds per step for each thread count."""

    candidates: tuple[int, ...]
    seconds_per_step: dict[int, float] = field(default_factory=dict)
    measured_at: dict[int, int] = field(default_factory=dict)  # block number of each count's latest measurement
    blocks: int = 0
    current: int = 0
    blocks_until_trial: int = 0

    def next_count(self) -> int:
        """The count for the next block: an unmeasured one first, then the current one, or when a trial is due,
        the other count measured longest ago (so that every count is measured again now and then)."""
        unmeasured = [count for count in self.candidates if count not in self.seconds_per_step]
        if unmeasured:
            return unmeasured[0]
        if self.blocks_until_trial <= 0:
            return self._next_trial()
        return self.current

    def _next_trial(self) -> int:
        return min((count for count in self.candidates if count != self.current), key=self.measured_at.__getitem__)

    def record(self, count: int, seconds: float) -> None:
        """Take in one block's seconds per step at `count` threads and update the choice."""
        known = self.seconds_per_step
        if count == self.current and count in known:
            known[count] += ThreadCountChooser.SMOOTHING * (seconds - known[count])
            self.blocks_until_trial -= 1
        else:  # a first measurement or a trial: it replaces what was known of this count
            known[count] = seconds
        self.blocks += 1
        self.measured_at[count] = self.blocks
        if len(known) < len(self.candidates):
            self.current = self.current or count
            return
        best = min(self.candidates, key=known.__getitem__)
        trial = count != self.current
        switch = known[best] < (1 - ThreadCountChooser.SWITCH_MARGIN) * known[self.current]
        if switch:
            self.current = best
        if switch or trial:
            slowdown = known[self._next_trial()] / known[self.current]
            self.blocks_until_trial = ThreadCountChooser.trial_interval(slowdown)


class ThreadCountChooser:
    """
    Chooses, online, how many threads run a kind of block of work (`key`): every block runs under one count and is
    timed; the count with the lowest smoothed seconds per step is used, and now and then another one (the one
    measured longest ago) is tried once on a block. If the current count gets clearly slower than another was
    measured at (another process started), the chooser switches at once; "clearly": by more than `SWITCH_MARGIN`,
    so that the noise of single blocks (calls of different lengths, other processes' bursts) does not send it back
    and forth between counts that are about as fast. Trials are spaced so that a losing one costs at
    most about `TRIAL_BUDGET` of the time in between (`trial_interval`): a count twice as slow is tried every 34
    blocks, one ten times as slow every 300 (at most every `MAX_TRIAL_INTERVAL` blocks, so a count over 30x slower
    costs more than the budget). Counts: `thread_counts(torch.get_num_threads())`,
    so `torch.set_num_threads` still sets the maximum.
    """

    SMOOTHING = 0.3
    SWITCH_MARGIN = 0.1
    TRIAL_BUDGET = 0.03
    MIN_TRIAL_INTERVAL = 4
    MAX_TRIAL_INTERVAL = 1024

    def __init__(self) -> None:
        self._stats: dict[Hashable, _ThreadCountStats] = {}  # read and written under `THREAD_SETTING`

    @classmethod
    def trial_interval(cls, slowdown: float) -> int:
        """Blocks until the next trial of a count measured `slowdown` times slower than the current one."""
        if not slowdown < math.inf:  # inf or NaN
            return cls.MAX_TRIAL_INTERVAL
        blocks = math.ceil((slowdown - 1) / cls.TRIAL_BUDGET)
        return min(max(blocks, cls.MIN_TRIAL_INTERVAL), cls.MAX_TRIAL_INTERVAL)

    def stats(self, key: Hashable) -> dict[int, float]:
        """Seconds per step measured so far for `key` at the current thread setting, by count (for reports)."""
        entry = self._stats.get((key, torch.get_num_threads()))
        return dict(entry.seconds_per_step) if entry is not None else {}

    @contextlib.contextmanager
    def run(self, key: Hashable, steps: int) -> Iterator[int]:
        """Run a block of `steps` steps of work under the chosen thread count (yielded), timing it; the whole block
        holds `THREAD_SETTING` (one block at a time in the process: the count is process-wide)."""
        with THREAD_SETTING:
            available = torch.get_num_threads()
            entry = self._stats.setdefault((key, available), _ThreadCountStats(thread_counts(available)))
            count = entry.next_count()
            with num_threads(count):
                start = time.perf_counter()
                yield count
                elapsed = time.perf_counter() - start
            entry.record(count, elapsed / max(steps, 1))


THREAD_CHOOSER = ThreadCountChooser()

_SAME_RESULTS: dict[Hashable, bool] = {}
Probes = Callable[[], list[Callable[[], list[torch.Tensor]]]]  # makes the callables that run a step's products


def same_results_at(key: Hashable, counts: tuple[int, ...], probes: Probes) -> bool:
    """
    Whether every probe of `probes()` (callables running a step's products on fixed inputs) gives the same bits at
    every thread count in `counts`, checked once per process and `key`. oneDNN's products with packed weights split
    the output columns among threads, so they pass; MKL's `bmm` may split the inner dimension of large products, and
    then the thread count is left alone.
    """
    with THREAD_SETTING:  # probed once, by one Python thread
        known = _SAME_RESULTS.get(key)
        if known is None:
            known = _SAME_RESULTS[key] = _same_at_every_count(counts, probes)
        return known


def _same_at_every_count(counts: tuple[int, ...], probes: Probes) -> bool:
    """Whether the probes of `probes()` give the same bits at every count of `counts` (`same_results_at`)."""
    with torch.inference_mode():
        probes = probes()
        results = []
        for count in counts:
            with num_threads(count):
                results.append([out for probe in probes for out in probe()])
    return all(
        len(other) == len(results[0]) and all(torch.equal(a, b) for a, b in zip(results[0], other, strict=True))
        for other in results[1:]
    )
