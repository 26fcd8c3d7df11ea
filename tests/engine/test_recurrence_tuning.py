"""Run-time choices of the biLM's inference recurrence (`recurrence_tuning`, `CpuImplementation` settings): the
online thread-count chooser against a fake clock, the one-off choice of the step products, the bit-identity probe
across thread counts, and at model level: outputs that do not depend on the thread count, products that follow the
measurement, and the caller's thread count restored."""

import contextlib
import itertools
import math
from types import SimpleNamespace

import pytest
import torch
from model_inputs import char_ids as _char_ids
from model_inputs import (
    engine_of,
    quantized_copy,
    record_onednn_calls,
    reference_implementation,
    set_lstm_inference,
)
from model_inputs import random_model as _model

import modeling_elmo.engine.lstm_engine as modeling
from modeling_elmo.engine import recurrence_tuning, tuned_call
from modeling_elmo.engine.cpu_linear import onednn_linear_applies
from modeling_elmo.engine.lstm_engine import LstmEngine
from modeling_elmo.engine.recurrence_tuning import (
    ThreadCountChooser,
    choose_step_products,
    num_threads,
    rows_bucket,
    same_results_at,
    thread_counts,
)
from modeling_elmo.inference.batches import tuning_key

MIN_INTERVAL = ThreadCountChooser.MIN_TRIAL_INTERVAL
MAX_INTERVAL = ThreadCountChooser.MAX_TRIAL_INTERVAL
SENTENCES = [
    "the bank closed its doors .".split(),
    "river boats go by".split(),
    "a café".split(),
    "of the river , a bank".split(),
]
TOLERANCE = 1e-6


def _onednn_applies() -> bool:
    return onednn_linear_applies(torch.zeros(1), torch.zeros(1))


@pytest.fixture(autouse=True)
def fresh_caches(monkeypatch):
    """Each test measures and probes anew, and leaves the process-wide choices of other tests alone."""
    monkeypatch.setattr(recurrence_tuning, "_STEP_PRODUCTS_CHOICES", {})
    monkeypatch.setattr(recurrence_tuning, "_SAME_RESULTS", {})


@pytest.fixture
def two_threads():
    """torch set to 2 threads for the test (whatever the machine has), the caller's count restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


class _FakeMachine:
    """torch's thread setting and `recurrence_tuning`'s clock, faked: a block costs what the test says."""

    def __init__(self, monkeypatch, available: int):
        self.threads, self.available, self.now = available, available, 0.0
        monkeypatch.setattr(torch, "get_num_threads", lambda: self.threads)
        monkeypatch.setattr(torch, "set_num_threads", self._set_threads)
        monkeypatch.setattr(recurrence_tuning, "time", SimpleNamespace(perf_counter=lambda: self.now))

    def _set_threads(self, count: int) -> None:
        assert isinstance(count, int) and count >= 1
        self.threads = count

    def run_blocks(self, chooser: ThreadCountChooser, blocks: int, seconds_per_step, steps: int = 10) -> list[int]:
        """Run `blocks` blocks of `steps` steps through `chooser`; `seconds_per_step(count, block)` is the cost of a
        step at `count` threads in block number `block`. Returns the count each block ran at."""
        counts = []
        for block in range(blocks):
            with chooser.run("key", steps) as count:
                assert torch.get_num_threads() == count  # the block runs at the count it is told
                self.now += seconds_per_step(count, block) * steps
            assert torch.get_num_threads() == self.available  # restored after the block
            counts.append(count)
        return counts


def _steady(costs: dict[int, float]):
    return lambda count, block: costs[count]


def _with_trials(warm_up: list[int], best: int, other: int, interval: int, trials: int) -> list[int]:
    """A run's counts: `warm_up`, then `trials` times `interval` blocks at `best` followed by a trial of `other`."""
    return list(warm_up) + ([best] * interval + [other]) * trials


def _overhead(costs: dict[int, float], counts: list[int]) -> float:
    """The time `counts` took beyond running every block at the fastest count, relative to that."""
    best = min(costs.values())
    return sum(costs[count] for count in counts) / (best * len(counts)) - 1


# --- ThreadCountChooser ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slowdown", "blocks"),
    [
        (1.0, MIN_INTERVAL),
        (1.05, MIN_INTERVAL),
        (2.0, 34),
        (10.0, 300),
        (100.0, MAX_INTERVAL),
        (math.inf, MAX_INTERVAL),
    ],
)
def test_trial_interval_spends_the_budget_on_a_losing_trial(slowdown, blocks):
    """A trial of a count `slowdown` times slower costs `slowdown - 1` blocks' time: one in TRIAL_BUDGET (3%) of
    the blocks in between (as documented: twice as slow every 34 blocks, ten times every 300), within the bounds."""
    assert ThreadCountChooser.trial_interval(slowdown) == blocks
    assert ThreadCountChooser.trial_interval(math.nan) == MAX_INTERVAL


def test_chooser_measures_every_count_first_then_uses_the_faster_one(monkeypatch):
    machine = _FakeMachine(monkeypatch, available=2)
    chooser = ThreadCountChooser()
    counts = machine.run_blocks(chooser, 2 + 34, _steady({2: 1.0, 1: 2.0}))
    assert counts[:2] == [2, 1]  # both measured, all threads first
    assert set(counts[2:]) == {2}  # no trial within the first interval
    with monkeypatch.context() as patch:
        patch.setattr(torch, "get_num_threads", lambda: 2)
        assert chooser.stats("key") == {2: pytest.approx(1.0), 1: pytest.approx(2.0)}


@pytest.mark.parametrize(
    ("costs", "best", "other", "interval"),
    [
        ({2: 1.0, 1: 2.0}, 2, 1, 34),  # twice as slow: every 34 blocks
        ({2: 2.0, 1: 1.0}, 1, 2, 34),
        ({2: 1.0, 1: 10.0}, 2, 1, 300),
        ({2: 1.0, 1: 1.01}, 2, 1, MIN_INTERVAL),  # hardly slower: still not more often than this
        ({2: 1.0, 1: 1000.0}, 2, 1, MAX_INTERVAL),  # much slower: still tried, load may leave
    ],
)
def test_chooser_tries_the_other_count_at_intervals_set_by_its_slowdown(monkeypatch, costs, best, other, interval):
    machine = _FakeMachine(monkeypatch, available=2)
    expected = _with_trials([2, 1], best, other, interval, trials=3)
    assert machine.run_blocks(ThreadCountChooser(), len(expected), _steady(costs)) == expected


def test_chooser_with_three_counts_tries_each_other_count_by_its_own_spacing(monkeypatch):
    """8 threads available: 8, 4 and 1 measured, then trials take turns, the one measured longest ago first, each
    spaced by its own slowdown: 4 (twice as slow) after 34 blocks, 1 (ten times) after 300."""
    machine = _FakeMachine(monkeypatch, available=8)
    expected = [8, 4, 1] + [8] * 34 + [4] + [8] * 300 + [1] + [8] * 34 + [4]
    assert machine.run_blocks(ThreadCountChooser(), len(expected), _steady({8: 1.0, 4: 2.0, 1: 10.0})) == expected


def test_chooser_measures_again_a_count_that_was_slow_once(monkeypatch):
    """8 threads slow in the first block only (a busy moment during warm-up): a later trial finds them fastest."""
    machine = _FakeMachine(monkeypatch, available=8)

    def seconds_per_step(count: int, block: int) -> float:
        return {8: 5.0 if block == 0 else 0.5, 4: 1.0, 1: 2.0}[count]

    counts = machine.run_blocks(ThreadCountChooser(), 1000, seconds_per_step)
    assert counts[-1] == 8 and counts[500:].count(8) >= 490


def test_chooser_spaces_trials_by_the_latest_measurement_of_the_other_count(monkeypatch):
    """1 thread is twice as slow, then (from its second trial on) four times: trials every 34, then 100 blocks."""
    machine = _FakeMachine(monkeypatch, available=2)
    first_trial = 2 + 34

    def seconds_per_step(count: int, block: int) -> float:
        return 1.0 if count == 2 else (2.0 if block <= first_trial else 4.0)

    expected = [2, 1] + [2] * 34 + [1] + [2] * 34 + [1] + ([2] * 100 + [1]) * 2
    assert machine.run_blocks(ThreadCountChooser(), len(expected), seconds_per_step) == expected


def test_chooser_leaves_a_count_that_gets_slower_at_once_and_comes_back_after_the_load(monkeypatch):
    machine = _FakeMachine(monkeypatch, available=2)
    load = range(100, 600)  # blocks during which another process makes 2 threads 10x slower
    costs = {2: 1.0, 1: 1.8}

    def seconds_per_step(count: int, block: int) -> float:
        return 10.0 if count == 2 and block in load else costs[count]

    counts = machine.run_blocks(ThreadCountChooser(), 1200, seconds_per_step)
    assert counts[99] == 2  # the faster count before the load (no trial due)
    assert counts[100] == 2 and counts[101] == 1  # one slow block at 2 threads, then 1 thread at once
    # under load, trials of 2 threads lose and get rarer: at most one in (10 / 1.8 - 1) / TRIAL_BUDGET blocks
    trials_under_load = counts[101 : load.stop].count(2)
    assert 1 <= trials_under_load <= len(load) * ThreadCountChooser.TRIAL_BUDGET / (10 / 1.8 - 1) + 2
    after = counts[load.stop :]
    first_fast = after.index(2)  # a trial finds 2 threads fast again within that interval
    assert first_fast <= (10 / 1.8 - 1) / ThreadCountChooser.TRIAL_BUDGET + 1
    assert _overhead(costs, after[first_fast:]) <= ThreadCountChooser.TRIAL_BUDGET  # back to the steady state


def test_chooser_keeps_its_count_when_another_is_faster_by_less_than_the_margin(monkeypatch):
    """Calls of different lengths make single blocks noisy: a count 5% faster is not worth switching back and forth
    for; one clearly faster is taken."""
    machine = _FakeMachine(monkeypatch, available=2)
    noisy = [1.0, 0.93, 1.07, 0.97, 1.03]  # the current count's blocks vary by +-7% around 1.0

    def seconds_per_step(count: int, block: int) -> float:
        return noisy[block % len(noisy)] if count == 2 else 0.96

    counts = machine.run_blocks(ThreadCountChooser(), 200, seconds_per_step)
    assert counts[:2] == [2, 1] and counts.count(1) <= 2 + 200 // MIN_INTERVAL  # first measurement, then trials
    assert all(run == [1] for run in _runs_of(counts[2:], 1))  # never stays on 1 thread beyond one trial block

    clearly = machine.run_blocks(ThreadCountChooser(), 20, lambda count, block: 1.0 if count == 2 else 0.85)
    assert clearly[2:8] == [1] * 6  # switched at once (trials of 2 threads come later)


def _runs_of(counts: list[int], value: int) -> list[list[int]]:
    """The maximal runs of `value` in `counts`."""
    return [list(run) for count, run in itertools.groupby(counts) if count == value]


def test_chooser_follows_a_moderate_slowdown_within_a_few_blocks(monkeypatch):
    """2 threads get 1.5x slower, now slower than 1 thread: the smoothed estimate crosses within a few blocks."""
    machine = _FakeMachine(monkeypatch, available=2)
    slowdown = 11  # after the warm-up and the first trial (1.2x slower: after 7 blocks), which 2 threads win

    def seconds_per_step(count: int, block: int) -> float:
        if count == 2:
            return 1.5 if block >= slowdown else 1.0
        return 1.2

    counts = machine.run_blocks(ThreadCountChooser(), 40, seconds_per_step)
    assert counts[2:slowdown] == [2] * 7 + [1] + [2]
    switch = counts.index(1, slowdown)
    # smoothed 1.0 -> 1.15, 1.26, 1.33, 1.38: past 1.2 / (1 - SWITCH_MARGIN) = 1.33 after 4 blocks
    assert switch == slowdown + 4
    assert counts[switch : switch + MIN_INTERVAL] == [1] * MIN_INTERVAL


@pytest.mark.parametrize(
    ("available", "costs"),
    [
        (2, {2: 1.0, 1: 1.02}),
        (2, {2: 1.0, 1: 1.5}),
        (2, {2: 3.0, 1: 1.0}),
        (2, {2: 1.0, 1: 20.0}),
        (8, {8: 1.0, 4: 1.2, 1: 3.0}),
        (8, {8: 2.0, 4: 1.0, 1: 1.5}),
        (8, {8: 3.0, 4: 2.0, 1: 1.0}),
    ],
)
def test_chooser_spends_at_most_its_budget_on_losing_counts(monkeypatch, available, costs):
    """The price of following the load: in a long steady run the trials of losing counts cost at most about
    TRIAL_BUDGET of the time, once the warm-up is done."""
    machine = _FakeMachine(monkeypatch, available=available)
    counts = machine.run_blocks(ThreadCountChooser(), 20000, _steady(costs))
    best = min(costs, key=costs.__getitem__)
    steady = counts[len(costs) :]
    assert _overhead(costs, steady) <= ThreadCountChooser.TRIAL_BUDGET
    assert sum(count != best for count in steady) >= len(steady) / (MAX_INTERVAL + 1) - 1  # it keeps trying


def test_chooser_overhead_is_bounded_by_max_trial_interval_for_very_slow_counts(monkeypatch):
    """A count 100x slower cannot be tried only every 3300 blocks: every MAX_TRIAL_INTERVAL, a bounded cost."""
    machine = _FakeMachine(monkeypatch, available=2)
    costs = {2: 1.0, 1: 100.0}
    counts = machine.run_blocks(ThreadCountChooser(), 20 * MAX_INTERVAL, _steady(costs))
    assert _overhead(costs, counts[2:]) <= (100.0 - 1) / MAX_INTERVAL


def test_chooser_keeps_its_measurements_per_key_and_thread_setting(monkeypatch):
    machine = _FakeMachine(monkeypatch, available=2)
    chooser = ThreadCountChooser()
    machine.run_blocks(chooser, 3, _steady({2: 1.0, 1: 2.0}))
    with chooser.run("other", 5) as count:
        assert count == 2  # a new key measures from scratch: all threads first
        machine.now += 5.0
    machine.threads = machine.available = 8
    with chooser.run("key", 1) as count:
        assert count == 8  # another thread setting: other candidates, measured anew
    assert chooser.stats("key") == {8: 0.0}


def test_chooser_restores_the_threads_when_the_block_raises(monkeypatch):
    machine = _FakeMachine(monkeypatch, available=2)
    chooser = ThreadCountChooser()
    machine.run_blocks(chooser, 1, _steady({2: 1.0, 1: 2.0}))
    with pytest.raises(RuntimeError, match="inside"), chooser.run("key", 1) as count:
        assert count == 1 and torch.get_num_threads() == 1
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 2
    assert chooser.stats("key") == {2: 1.0}  # the interrupted block measured nothing


@pytest.mark.parametrize(
    ("available", "expected"), [(1, (1,)), (2, (2, 1)), (3, (3, 1)), (4, (4, 2, 1)), (8, (8, 4, 1)), (9, (9, 4, 1))]
)
def test_thread_counts(available, expected):
    assert thread_counts(available) == expected


@pytest.mark.parametrize(("rows", "bucket"), [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (256, 256), (257, 512)])
def test_rows_bucket(rows, bucket):
    assert rows_bucket(rows) == bucket


def test_num_threads_sets_and_restores_also_on_errors(two_threads):
    with num_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with pytest.raises(RuntimeError, match="inside"), num_threads(1):
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 2


# --- choose_step_products ---------------------------------------------------------------------------------------


class _TimedCandidates:
    """Candidate steps whose timed cost comes from a fake clock: `costs[name]` is the list of costs of its calls in
    turn (the last repeated), and each call records the thread count it ran at."""

    def __init__(self, monkeypatch, costs: dict[str, list[float]]):
        self.now, self.costs, self.calls, self.threads, self.factory_calls = 0.0, costs, [], set(), 0
        monkeypatch.setattr(recurrence_tuning, "time", SimpleNamespace(perf_counter=lambda: self.now))

    def factory(self) -> dict:
        self.factory_calls += 1
        return {name: self._step(name) for name in self.costs}

    def _step(self, name: str):
        def step():
            costs = self.costs[name]
            self.now += costs[min(self.calls.count(name), len(costs) - 1)]
            self.calls.append(name)
            self.threads.add(torch.get_num_threads())

        return step


@pytest.mark.parametrize(
    ("bmm_cost", "expected"),
    [
        (0.5, "bmm"),
        (0.98 * recurrence_tuning.STEP_PRODUCTS_MARGIN, "bmm"),
        (1.02 * recurrence_tuning.STEP_PRODUCTS_MARGIN, "onednn"),  # faster, but not by the margin
        (1.0, "onednn"),
        (2.0, "onednn"),
    ],
)
def test_step_products_prefer_the_first_unless_another_is_clearly_faster(monkeypatch, two_threads, bmm_cost, expected):
    candidates = _TimedCandidates(monkeypatch, {"onednn": [1.0], "bmm": [bmm_cost]})
    assert choose_step_products("shape", candidates.factory) == expected
    repeats = recurrence_tuning.STEP_PRODUCTS_REPEATS
    assert candidates.calls.count("onednn") == candidates.calls.count("bmm") == 2 * (1 + repeats)
    assert candidates.threads == {2, 1}  # timed at every count the thread chooser may run them at
    assert torch.get_num_threads() == 2  # the caller's count restored


def test_step_products_compare_each_at_its_best_thread_count(monkeypatch, two_threads):
    """bmm gains more from a second thread (bandwidth-bound steps): it wins although oneDNN is faster on one."""
    candidates = _TimedCandidates(monkeypatch, {"onednn": [1.0], "bmm": [1.2]})
    cost = {("onednn", 2): 0.8, ("onednn", 1): 1.0, ("bmm", 2): 0.6, ("bmm", 1): 1.2}
    candidates._step = lambda name: (
        lambda: setattr(candidates, "now", candidates.now + cost[name, torch.get_num_threads()])
    )
    assert choose_step_products("bandwidth-bound", candidates.factory) == "bmm"


def test_step_products_take_the_best_of_the_repeats(monkeypatch):
    """The untimed first call and a slow timed run (another process got the CPU) do not count."""
    candidates = _TimedCandidates(monkeypatch, {"onednn": [5.0, 1.0], "bmm": [5.0, 9.0, 0.5]})
    assert choose_step_products("shape", candidates.factory) == "bmm"
    candidates = _TimedCandidates(monkeypatch, {"onednn": [5.0, 9.0, 1.0], "bmm": [0.1, 0.95]})
    assert choose_step_products("other shape", candidates.factory) == "onednn"  # the first, untimed call is not timed


def test_step_products_are_chosen_once_per_key(monkeypatch, two_threads):
    candidates = _TimedCandidates(monkeypatch, {"onednn": [1.0], "bmm": [0.5]})
    assert choose_step_products(("shape", 8), candidates.factory) == "bmm"
    calls = len(candidates.calls)
    candidates.costs = {"onednn": [0.1], "bmm": [1.0]}
    assert choose_step_products(("shape", 8), candidates.factory) == "bmm"  # cached: nothing runs again
    assert len(candidates.calls) == calls and candidates.factory_calls == 1
    assert choose_step_products(("shape", 16), candidates.factory) == "onednn"  # another key: measured
    assert recurrence_tuning._STEP_PRODUCTS_CHOICES == {
        (("shape", 8), 2): "bmm",
        (("shape", 8), 1): "bmm",  # decided by the same measurement (see the next test)
        (("shape", 16), 2): "onednn",
        (("shape", 16), 1): "onednn",
    }


def test_a_measurement_at_two_threads_also_decides_for_one(monkeypatch, two_threads):
    """The one-thread times of the 2-thread measurement decide for calls run on one thread: not measured again."""
    candidates = _TimedCandidates(monkeypatch, {"onednn": [1.0], "bmm": [1.0]})
    cost = {("onednn", 2): 0.4, ("onednn", 1): 1.0, ("bmm", 2): 0.5, ("bmm", 1): 0.5}
    candidates._step = lambda name: (
        lambda: setattr(candidates, "now", candidates.now + cost[name, torch.get_num_threads()])
    )
    assert choose_step_products("shape", candidates.factory) == "onednn"  # 0.4 at 2 threads
    with num_threads(1):
        assert choose_step_products("shape", candidates.factory) == "bmm"  # 0.5 vs 1.0 at 1 thread
    assert candidates.factory_calls == 1


# --- same_results_at --------------------------------------------------------------------------------------------


def test_same_results_detects_outputs_that_depend_on_the_thread_count(two_threads):
    seen = []

    def depends():
        seen.append(torch.get_num_threads())
        return [torch.ones(3), torch.tensor([float(torch.get_num_threads())])]

    def does_not_depend():
        seen.append(torch.get_num_threads())
        return [torch.arange(6.0).reshape(2, 3) @ torch.ones(3, 4)]

    assert same_results_at("depends", (2, 1), lambda: [does_not_depend, depends]) is False
    assert sorted(seen) == [1, 1, 2, 2]  # every probe at every count
    assert same_results_at("does not depend", (2, 1), lambda: [does_not_depend]) is True
    assert torch.get_num_threads() == 2

    def not_again():
        raise AssertionError("probed again")

    assert same_results_at("depends", (2, 1), not_again) is False  # cached per key
    assert same_results_at("does not depend", (2, 1), not_again) is True
    assert recurrence_tuning._SAME_RESULTS == {"depends": False, "does not depend": True}


def test_same_results_compares_bits_not_closeness(two_threads):
    def tiny_difference():
        return [torch.tensor([1.0]) + (torch.get_num_threads() == 1) * 2.0**-23]  # one ulp

    assert same_results_at("tiny", (2, 1), lambda: [tiny_difference]) is False


# --- the model ----------------------------------------------------------------------------------------------------


def _hidden_states(model, ids) -> tuple[torch.Tensor, ...]:
    with torch.inference_mode():
        return model(ids, output_hidden_states=True).hidden_states


def _equal(left, right) -> bool:
    return all(torch.equal(a, b) for a, b in zip(left, right, strict=True))


def _max_difference(left, right) -> float:
    return float(torch.stack([(a - b).abs().amax() for a, b in zip(left, right, strict=True)]).amax())


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"products": "mkl"}, r"products must be one of 'onednn', 'views', 'bmm', 'packed', 'auto', got 'mkl'"),
        ({"products": "BMM"}, r"products must be one of"),
        ({"threads": 0}, r"threads must be 'auto' or a positive int, got 0"),
        ({"threads": -2}, r"threads must be 'auto' or a positive int, got -2"),
        ({"threads": True}, r"threads must be 'auto' or a positive int, got True"),
        ({"threads": "2"}, r"threads must be 'auto' or a positive int, got '2'"),
        ({"threads": 2.0}, r"threads must be 'auto' or a positive int, got 2.0"),
    ],
    ids=[
        "products-mkl",
        "products-BMM",
        "threads-0",
        "threads-negative",
        "threads-True",
        "threads-str",
        "threads-float",
    ],
)
def test_set_lstm_inference_refuses_bad_choices(random_checkpoint, arguments, message):
    model = _model(random_checkpoint)
    set_lstm_inference(model, "bmm", 3)
    with pytest.raises(ValueError, match=message):
        set_lstm_inference(model, **arguments)
    assert all(
        (engine_of(layer).products, engine_of(layer).threads) == ("bmm", 3) for layer in model.bilm.layers
    )  # unchanged


def test_set_lstm_inference_sets_every_layer(random_checkpoint):
    model = _model(random_checkpoint, n_layers=3)
    assert all(
        (engine_of(layer).products, engine_of(layer).threads) == ("onednn", None) for layer in model.bilm.layers
    )
    set_lstm_inference(model, "auto", threads=1)
    assert [(engine_of(layer).products, engine_of(layer).threads) for layer in model.bilm.layers] == [("auto", 1)] * 3
    set_lstm_inference(model)  # back to the predictable defaults
    assert [(engine_of(layer).products, engine_of(layer).threads) for layer in model.bilm.layers] == [
        ("onednn", None)
    ] * 3


def test_set_lstm_inference_refuses_packed_where_onednn_does_not_apply(random_checkpoint, monkeypatch):
    model = _model(random_checkpoint)
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)  # as on a machine without oneDNN
    with pytest.raises(ValueError, match="needs PyTorch's oneDNN on an x86 CPU"):
        set_lstm_inference(model, "packed")
    set_lstm_inference(model, "onednn")  # the default: `bmm` where oneDNN does not apply


def _is_step_key(key: tuple) -> bool:
    """Whether a key of THREAD_CHOOSER or `same_results_at` is one of the recurrence's blocks of time steps:
    (shapes, products, ...), not one of a whole call."""
    return key[1] in ("onednn", "packed", "bmm", "int8", "bf16")


@pytest.fixture
def spied_chooser(monkeypatch):
    """A fresh THREAD_CHOOSER for the model that tries the other count after every block, and records the counts it
    runs blocks at (`.used`: (key, count)) and the verdicts of `same_results_at` (`.verdicts`: chooser key -> bool)."""
    monkeypatch.setattr(ThreadCountChooser, "MIN_TRIAL_INTERVAL", 1)
    monkeypatch.setattr(ThreadCountChooser, "MAX_TRIAL_INTERVAL", 1)
    chooser = ThreadCountChooser()
    chooser.used, chooser.verdicts = [], {}
    run, probe = chooser.run, modeling.same_results_at

    @contextlib.contextmanager
    def spy_run(key, steps):
        with run(key, steps) as count:
            chooser.used.append((key, count))
            yield count

    def spy_probe(key, counts, probes):
        chooser.verdicts[key[:-1]] = verdict = probe(key, counts, probes)
        return verdict

    monkeypatch.setattr(chooser, "run", spy_run)
    monkeypatch.setattr(modeling, "THREAD_CHOOSER", chooser)
    monkeypatch.setattr(modeling, "same_results_at", spy_probe)
    return chooser


@pytest.mark.parametrize("products", ["onednn", "packed", "bmm"])
def test_outputs_do_not_depend_on_the_thread_count(
    random_checkpoint, monkeypatch, two_threads, spied_chooser, products
):
    if products != "bmm" and not _onednn_applies():
        pytest.skip("oneDNN's products apply on x86 CPUs only")
    monkeypatch.setattr(LstmEngine, "INPUT_GATE_BLOCK_ROWS", 3)  # many blocks, each run at the chooser's count
    model = _model(random_checkpoint, seed=3)
    ids = _char_ids(SENTENCES)
    with reference_implementation(model):
        reference = _hidden_states(model, ids)
    results = {}
    for threads in (1, 2):
        set_lstm_inference(model, products, threads)
        results[threads] = _hidden_states(model, ids)
    assert not spied_chooser.used and not spied_chooser.verdicts  # fixed counts: neither probed nor chosen
    set_lstm_inference(model, products, "auto")
    automatic = [_hidden_states(model, ids) for _ in range(4)]

    verdicts = {key: same for key, same in spied_chooser.verdicts.items() if _is_step_key(key)}
    used = [(key, count) for key, count in spied_chooser.used if _is_step_key(key)]
    assert verdicts and all(key[1] == products for key in verdicts)
    assert {key for key, _ in used} == {key for key, same in verdicts.items() if same}
    if products != "bmm":
        assert all(verdicts.values())  # oneDNN's products split the output columns among threads
    if all(verdicts.values()):
        assert {count for _, count in used} == {1, 2}
        assert _equal(results[1], results[2])
    for found in automatic:
        assert _equal(found, results[2])  # blocks the chooser does not run are left at the caller's 2 threads
        assert _max_difference(found, reference) <= TOLERANCE


@pytest.fixture
def onednn_calls(monkeypatch) -> list[torch.Size]:
    """Records the input shape of every oneDNN linear call."""
    return record_onednn_calls(monkeypatch)


@pytest.fixture
def lstm_onednn_calls(onednn_calls, monkeypatch) -> list[torch.Size]:
    """Records the input shape of every oneDNN linear call made inside the biLM's inference recurrence (its
    products and their measurement), not the char CNN's."""
    return record_onednn_calls(monkeypatch, lstm_only=True)


PROBE_STEPS = 4  # the default of LstmEngine._steps_probe


@pytest.mark.parametrize(
    ("costs", "expected"),
    [
        ({"packed": 1.0, "bmm": 0.5}, "bmm"),
        ({"packed": 0.95, "bmm": 1.0}, "bmm"),  # packed faster, but not by the margin: bmm needs no packed copy
        ({"packed": 1.0, "bmm": 1.0}, "bmm"),
        ({"packed": 0.5, "bmm": 1.0}, "packed"),
    ],
)
def test_automatic_products_follow_the_measurement(random_checkpoint, monkeypatch, lstm_onednn_calls, costs, expected):
    if not _onednn_applies():
        pytest.skip("the choice is between oneDNN and bmm on x86 CPUs only")
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(recurrence_tuning, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    probe = LstmEngine._steps_probe

    def timed_probe(self, layer, linear_sets, rows, steps=PROBE_STEPS):
        run, kind = (
            probe(self, layer, linear_sets, rows, steps),
            "bmm" if linear_sets[0][0] == slice(0, 2) else "packed",
        )

        def timed_run():
            clock.now += costs[kind]
            return run()

        return timed_run

    monkeypatch.setattr(LstmEngine, "_steps_probe", timed_probe)
    model = _model(random_checkpoint, seed=4)
    ids = _char_ids(SENTENCES)
    set_lstm_inference(model, "auto", threads=1)
    num_steps = max(map(len, SENTENCES)) + 2
    # per layer and direction: 1 input-to-gate block, then per step the recurrent and projection products
    onednn_forward = len(model.bilm.layers) * 2 * (1 + 2 * num_steps) if expected == "packed" else 0
    first = _hidden_states(model, ids)
    choices = recurrence_tuning._STEP_PRODUCTS_CHOICES
    # both layers: one shape, one row count (decided for every thread setting the measurement covers)
    assert len({key for key, _ in choices}) == 1 and set(choices.values()) == {expected}
    # the measurement: per direction, the packed candidate's recurrence over PROBE_STEPS steps (per step the
    # recurrent and projection products; the input-to-gate product is left out), untimed then repeated
    counts = len(recurrence_tuning.thread_counts(torch.get_num_threads()))  # timed at each
    measured = counts * (1 + recurrence_tuning.STEP_PRODUCTS_REPEATS) * 2 * 2 * PROBE_STEPS
    assert len(lstm_onednn_calls) == measured + onednn_forward
    lstm_onednn_calls.clear()
    found = _hidden_states(model, ids)  # chosen: no more measurements
    assert len(lstm_onednn_calls) == onednn_forward
    assert all(shape[0] == 1 for shape in lstm_onednn_calls)  # one direction at a time
    # the packed copy (and its check on every call) is kept only where oneDNN runs
    assert all((engine_of(layer)._derived is not None) == (expected == "packed") for layer in model.bilm.layers)
    set_lstm_inference(model, expected, threads=1)
    forced = _hidden_states(model, ids)
    assert _equal(first, forced) and _equal(found, forced)


def test_automatic_products_are_bmm_where_onednn_does_not_apply(random_checkpoint, monkeypatch, onednn_calls):
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", False)
    model = _model(random_checkpoint, seed=4)
    set_lstm_inference(model, "auto", threads=1)
    _hidden_states(model, _char_ids(SENTENCES))
    assert not onednn_calls and not recurrence_tuning._STEP_PRODUCTS_CHOICES  # nothing to choose, nothing measured


@pytest.mark.parametrize("threads", [1, 2, "auto"])
def test_the_callers_thread_count_is_restored(random_checkpoint, monkeypatch, two_threads, spied_chooser, threads):
    monkeypatch.setattr(LstmEngine, "INPUT_GATE_BLOCK_ROWS", 3)
    monkeypatch.setattr(modeling, "same_results_at", lambda *args: True)  # the chooser runs every block
    model = _model(random_checkpoint, seed=5)
    ids = _char_ids(SENTENCES)
    set_lstm_inference(model, threads=threads)
    _hidden_states(model, ids)
    assert torch.get_num_threads() == 2
    counts = {count for _, count in spied_chooser.used}
    assert counts == ({1, 2} if threads == "auto" else set())

    cell = modeling.lstm_cell

    def cell_failing_at_one_thread(*args):
        if torch.get_num_threads() == 1:
            raise RuntimeError("interrupted")
        return cell(*args)

    monkeypatch.setattr(modeling, "lstm_cell", cell_failing_at_one_thread)
    if threads == 2:
        _hidden_states(model, ids)  # never at one thread
    else:
        with pytest.raises(RuntimeError, match="interrupted"):
            _hidden_states(model, ids)
    assert torch.get_num_threads() == 2


def test_quantized_and_float32_calls_are_measured_apart(
    random_checkpoint, monkeypatch, two_threads, spied_chooser, tmp_path
):
    """Two models of the same shapes in one process, one quantized to int8 (faster per word): their calls must not
    share the chooser's measurements, or each would judge its counts by the other's times."""
    monkeypatch.setattr(modeling, "same_results_at", lambda *args: True)
    ids = _char_ids(SENTENCES)
    float32 = _model(random_checkpoint, seed=6)
    int8 = quantized_copy(float32, "int8", tmp_path / "float32")
    for model in (float32, int8):
        set_lstm_inference(model, "auto", "auto")  # opt-in (the quantized layers run their own products)
        with torch.inference_mode():  # the whole call's thread count too, as `elmo-embed` chooses it
            tuned_call(lambda model=model: _hidden_states(model, ids), (ids != 0).any(dim=-1), tuning_key(model))
    call_keys = {key for key, _ in spied_chooser.used if not _is_step_key(key)}
    assert len(call_keys) == 2
    assert {key[1] for key in call_keys} == {tuning_key(float32), tuning_key(int8)}  # told apart by the model
