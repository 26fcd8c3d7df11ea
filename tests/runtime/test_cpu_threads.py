"""`configure_cpu_threads`: a command runs on the cores other processes leave free, changes nothing on an idle
machine, keeps the user's settings, and every command that owns its process calls it first; a process given a share
of the CPUs (a Ray Serve replica) runs on at most that share."""

import importlib
import os
import subprocess
import sys

import pytest
import torch

from modeling_elmo.runtime import cpu_threads
from modeling_elmo.runtime.cpu_threads import busy_cpus, configure_cpu_threads, physical_cores


class Called(Exception):
    """Raised by a stand-in for `configure_cpu_threads`."""


@pytest.fixture
def machine(monkeypatch):
    """A machine of `cpus` CPUs (one core each) of which other processes keep `busy` busy, set by the test; no
    OpenMP setting in the environment; `torch.set_num_threads` recorded instead of applied."""
    state = {"cpus": 2, "busy": 0.0, "set_num_threads": []}
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(state["cpus"])))
    monkeypatch.setattr(cpu_threads, "physical_cores", lambda cpus: len(cpus))
    monkeypatch.setattr(cpu_threads, "busy_cpus", lambda cpus, seconds: state["busy"])
    monkeypatch.setattr(torch, "set_num_threads", state["set_num_threads"].append)
    for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(name, raising=False)
    return state


def omp_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY") if name in os.environ}


@pytest.mark.parametrize("busy", [0.0, 0.3])
def test_an_idle_machine_changes_nothing(machine, monkeypatch, busy):
    machine["busy"] = busy  # a little background activity is not a busy process
    monkeypatch.delitem(sys.modules, "torch")
    assert configure_cpu_threads() is None
    assert omp_environment() == {} and machine["set_num_threads"] == []


def test_beside_a_busy_process_before_torch_starts(machine, monkeypatch):
    machine["busy"] = 1.0
    monkeypatch.delitem(sys.modules, "torch")  # as at the start of a command: OpenMP reads its environment later
    assert configure_cpu_threads() == 1
    assert omp_environment() == {"OMP_NUM_THREADS": "1"}  # one thread does not wait for others: no wait policy
    assert machine["set_num_threads"] == []


def test_threads_left_beside_a_busy_process_sleep_while_they_wait(machine, monkeypatch):
    machine["cpus"], machine["busy"] = 4, 1.2
    monkeypatch.delitem(sys.modules, "torch")
    assert configure_cpu_threads() == 3
    assert omp_environment() == {"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "PASSIVE"}


def test_an_overloaded_machine_gets_one_thread(machine, monkeypatch):
    machine["cpus"], machine["busy"] = 4, 4.0
    monkeypatch.delitem(sys.modules, "torch")
    assert configure_cpu_threads() == 1
    assert omp_environment() == {"OMP_NUM_THREADS": "1"}


def test_after_torch_started_the_count_is_set_through_torch(machine):
    machine["busy"] = 1.0
    assert configure_cpu_threads() == 1
    assert machine["set_num_threads"] == [1]
    assert omp_environment() == {}  # OpenMP has read its environment already: nothing is set that would not apply


def test_the_users_settings_are_kept(machine, monkeypatch):
    machine["cpus"], machine["busy"] = 4, 1.0
    monkeypatch.delitem(sys.modules, "torch")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert configure_cpu_threads() == 3
    assert omp_environment() == {"OMP_NUM_THREADS": "3", "OMP_WAIT_POLICY": "ACTIVE"}
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    assert configure_cpu_threads() is None
    assert omp_environment() == {"OMP_NUM_THREADS": "4", "OMP_WAIT_POLICY": "ACTIVE"}


@pytest.mark.parametrize(
    "cpus, busy, reserved, threads",
    [
        (4, 0.0, 2, 2),  # an idle machine: the share, although the machine has more cores
        (4, 0.0, 2.5, 2),  # the share's whole part
        (4, 0.0, 0.5, 1),  # at least one
        (4, 0.0, 8, 4),  # no more than the cores
        (4, 3.0, 2, 1),  # fewer beside busy processes
    ],
)
def test_a_reserved_share_bounds_the_threads(machine, monkeypatch, cpus, busy, reserved, threads):
    machine["cpus"], machine["busy"] = cpus, busy
    monkeypatch.setenv("OMP_NUM_THREADS", str(max(1, int(reserved))))  # as Ray sets it in its workers: not the user's
    assert configure_cpu_threads(reserved_cpus=reserved) == threads
    assert machine["set_num_threads"] == [threads]


def test_a_reserved_share_before_torch_starts(machine, monkeypatch):
    machine["cpus"] = 4
    monkeypatch.delitem(sys.modules, "torch")
    assert configure_cpu_threads(reserved_cpus=2) == 2
    assert omp_environment() == {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}  # beside the other cores' work
    monkeypatch.delenv("OMP_WAIT_POLICY")
    assert configure_cpu_threads(reserved_cpus=4) == 4
    assert omp_environment() == {"OMP_NUM_THREADS": "4"}  # every core: OpenMP's own wait policy


@pytest.mark.integration
def test_busy_cpus_sees_a_busy_process():
    cpu = min(os.sched_getaffinity(0))
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(loop.pid, {cpu})
        busy_cpus([cpu], 0.2)  # the loop has started
        assert busy_cpus([cpu], 0.3) >= 0.8
    finally:
        loop.kill()
        loop.wait()


def test_physical_cores_of_this_machine():
    cpus = sorted(os.sched_getaffinity(0))
    assert 1 <= physical_cores(cpus) <= len(cpus)
    assert physical_cores([]) == 0


@pytest.mark.parametrize(
    "module, entry",
    [
        ("modeling_elmo.ner.train", "cli"),
        ("modeling_elmo.classification.train", "cli"),
        ("modeling_elmo.pretraining.train", "main"),
        ("modeling_elmo.embed.cli", "main"),
        ("modeling_elmo.conversion.convert_command", "main"),
    ],
)
def test_every_command_chooses_its_threads_first(monkeypatch, module, entry):
    command = importlib.import_module(module)

    def called() -> None:
        raise Called

    monkeypatch.setattr(command, "configure_cpu_threads", called)
    monkeypatch.setattr(sys, "argv", ["elmo-command", "--help"])
    with pytest.raises(Called):
        getattr(command, entry)()  # before anything else, even --help


@pytest.mark.parametrize(
    "module",
    ["modeling_elmo.pretraining.train", "modeling_elmo.embed.cli", "modeling_elmo.conversion.convert_command"],
)
def test_a_call_with_arguments_leaves_the_callers_process_alone(monkeypatch, module):
    """`main(argv)` runs inside another program (as in these tests): its threads are the caller's."""
    command = importlib.import_module(module)
    monkeypatch.setattr(command, "configure_cpu_threads", lambda: pytest.fail("threads configured"))
    with pytest.raises(SystemExit) as stop:
        command.main(["--help"])
    assert stop.value.code == 0
