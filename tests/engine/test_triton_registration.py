"""The Triton backend's names without its kernels: registered whether or not Triton is installed, a default only
where it is, and refused with one line naming what is missing when a model that it cannot run chooses it (the choice
then unchanged); its kernels are decorated only when first needed. Needs no Triton."""

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from model_inputs import random_model

from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from modeling_elmo.engine import triton_implementation

NAMES = ("triton", "triton_tf32", "triton_bf16")


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )


def test_all_three_names_are_registered_and_only_triton_can_be_a_default():
    assert set(NAMES) <= set(ALL_ELMO_IMPLEMENTATIONS.names())
    assert not {"triton_tf32", "triton_bf16"} & set(ALL_ELMO_IMPLEMENTATIONS.defaults)
    assert ("triton" in ALL_ELMO_IMPLEMENTATIONS.defaults) == (importlib.util.find_spec("triton") is not None)


@pytest.mark.parametrize("name", NAMES)
def test_without_triton_choosing_it_names_what_is_missing(random_checkpoint, monkeypatch, name):
    model = random_model(random_checkpoint, seed=1)
    model.set_implementation("eager")
    monkeypatch.setattr(
        triton_implementation, "triton_unavailable", lambda: "Triton is not installed (pip install 'x[gpu]')"
    )
    with pytest.raises(ValueError, match=rf"^Implementation '{name}' needs Triton: Triton is not installed") as error:
        model.set_implementation(name)
    assert "\n" not in str(error.value)
    assert {layer.implementation for layer in model.bilm.layers} == {"eager"}


def test_a_cpu_model_outside_the_interpreter_is_refused(random_checkpoint, monkeypatch):
    model = random_model(random_checkpoint, seed=2)
    monkeypatch.setattr(triton_implementation, "triton_unavailable", lambda: None)
    monkeypatch.setattr(triton_implementation, "kernels_interpreted", lambda: False)
    with pytest.raises(ValueError, match=r"^Implementation 'triton' runs on CUDA devices; the model is on cpu"):
        model.set_implementation("triton")
    assert {layer.implementation for layer in model.bilm.layers} == {None}


@pytest.mark.integration
def test_a_model_without_triton_imports_runs_and_refuses_it():
    """Triton made unimportable before `import modeling_elmo`: as where it is not installed."""
    result = _run_python(
        """
        import sys
        sys.modules["triton"] = None  # `import triton` raises ModuleNotFoundError
        import torch
        from modeling_elmo import ElmoConfig, ElmoModel
        from modeling_elmo.elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
        assert "triton" not in ALL_ELMO_IMPLEMENTATIONS.defaults, ALL_ELMO_IMPLEMENTATIONS.defaults
        model = ElmoModel(ElmoConfig(projection_dim=16, lstm_cell_size=32, num_hidden_layers=1)).eval()
        with torch.no_grad():
            model(torch.randint(1, 200, (1, 2, 50)))
        try:
            model.set_implementation("triton")
        except ValueError as error:
            print(error)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Implementation 'triton' needs Triton: Triton is not installed (install the gpu extra: pip install -e "
        "'.[gpu]' in a checkout, or see docs/install.md); registered are 'cpu', 'cpu_threads', 'eager', 'eager_tf32', "
        "'reference' (those that run here), or None for the default.\n"
    )


@pytest.mark.integration
@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed")
def test_neither_the_import_nor_a_cpu_call_decorates_the_kernels():
    """(PyTorch's dynamo imports Triton itself where it is installed; the kernels' module is ours.)"""
    result = _run_python(
        """
        import sys
        import torch
        from modeling_elmo import ElmoConfig, ElmoModel
        model = ElmoModel(ElmoConfig(projection_dim=16, lstm_cell_size=32, num_hidden_layers=1)).eval()
        with torch.no_grad():
            model(torch.randint(1, 200, (1, 2, 50)))
        print("modeling_elmo.engine.triton_kernels" in sys.modules)
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "False\n"
