"""The quantized time step's compiled regions (`engine.compiled_regions`, `quantization.time_steps`): eager unless
`ELMO_FUSED_STEP=1`, the eager operations taken when torch cannot compile, and the compiled step equal to the eager
one within tolerance on every method (the integration tier: it builds C++)."""

import json
import warnings

import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from modeling_elmo import ElmoQuantizationConfig
from modeling_elmo.engine.compiled_regions import FUSED_STEP_VARIABLE, CompiledRegion
from modeling_elmo.quantization import time_steps

REGION_NAMES = ("INT8_PRODUCTS_CELL", "INT8_PROJECTED_HIDDEN", "FLOAT_PRODUCTS_CELL")
# compiled against eager, every layer of the fixture (outputs up to 7): int8's float32 products carry the regions'
# sub-ulp differences; the bfloat16 products round their inputs, so one can move a value by a bfloat16 step (7.8e-3
# measured for bf16), the weight-only method's batch tolerance (test_quantized_models.BATCH_TOLERANCES)
FUSED_TOLERANCES = {"int8": 1e-4, "int8_weight_only": 0.02, "bf16": 0.02}


def _doubled(values: torch.Tensor) -> torch.Tensor:
    return values * 2


@pytest.fixture
def fresh_regions(monkeypatch):
    """The time step's regions replaced by new, undecided ones (the module's own may have decided already)."""
    regions = {name: CompiledRegion(getattr(time_steps, name).function) for name in REGION_NAMES}
    for name, region in regions.items():
        monkeypatch.setattr(time_steps, name, region)
    return regions


def test_regions_run_eagerly_unless_asked(monkeypatch):
    monkeypatch.delenv(FUSED_STEP_VARIABLE, raising=False)
    compiles = []
    monkeypatch.setattr(torch, "compile", lambda *args, **kwargs: compiles.append(args) or _doubled)
    region = CompiledRegion(_doubled)
    assert torch.equal(region(torch.ones(2, 3)), torch.full((2, 3), 2.0))
    assert not region.compiled and compiles == []


def test_a_failed_compile_warns_once_and_the_eager_operations_serve(monkeypatch):
    monkeypatch.setenv(FUSED_STEP_VARIABLE, "1")

    def no_compiler(*args, **kwargs):
        def compiled(*call_args):
            raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found")

        return compiled

    monkeypatch.setattr(torch, "compile", no_compiler)
    region = CompiledRegion(_doubled)
    with pytest.warns(RuntimeWarning, match="torch.compile failed here.*InvalidCxxCompiler.*eager"):
        assert torch.equal(region(torch.ones(2)), torch.full((2,), 2.0))
    assert not region.compiled
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(region(torch.ones(3)), torch.full((3,), 2.0))  # no second warning, no second try


def test_the_variable_asks_for_the_compiled_region(monkeypatch):
    monkeypatch.setenv(FUSED_STEP_VARIABLE, "1")
    asked = []

    def fake_compile(function, **options):
        asked.append(options)
        return lambda *args: function(*args) + 1  # tells the compiled call from the eager one

    monkeypatch.setattr(torch, "compile", fake_compile)
    region = CompiledRegion(_doubled)
    assert torch.equal(region(torch.ones(2)), torch.full((2,), 3.0))
    assert region.compiled and asked == [{"dynamic": True, "fullgraph": True}]


def _hidden_states(folder, method: str, batch) -> tuple[torch.Tensor, ...]:
    model = AutoModel.from_pretrained(folder, quantization_config=ElmoQuantizationConfig(method))
    with torch.inference_mode():
        return model(**batch, output_hidden_states=True).hidden_states


@pytest.mark.integration
@pytest.mark.parametrize("method", ["int8", "int8_weight_only", "bf16"])
def test_the_compiled_step_matches_the_eager_one(converted_fixture, fixture_dir, monkeypatch, fresh_regions, method):
    groups = json.loads((fixture_dir / "sentences.json").read_text())
    sentences = [sentence.split() for group in groups for sentence in group]
    tokenizer = AutoTokenizer.from_pretrained(converted_fixture)
    batch = tokenizer(sentences, is_split_into_words=True, return_tensors="pt", padding=True)
    monkeypatch.delenv(FUSED_STEP_VARIABLE, raising=False)
    eager = _hidden_states(converted_fixture, method, batch)
    assert not any(region.compiled for region in fresh_regions.values())
    for name in REGION_NAMES:  # undecided again, now asked to compile
        monkeypatch.setattr(time_steps, name, CompiledRegion(time_steps.__dict__[name].function))
    monkeypatch.setenv(FUSED_STEP_VARIABLE, "1")
    fused = _hidden_states(converted_fixture, method, batch)
    used = ("INT8_PRODUCTS_CELL", "INT8_PROJECTED_HIDDEN") if method == "int8" else ("FLOAT_PRODUCTS_CELL",)
    assert all(getattr(time_steps, name).compiled for name in used), "torch.compile did not serve the step"
    mask = batch["attention_mask"].bool()
    for index, (expected, found) in enumerate(zip(eager, fused, strict=True)):
        error = (expected[mask] - found[mask]).abs().max().item()
        assert error <= FUSED_TOLERANCES[method], f"{method}, layer {index}: compiled {error:.2e} from the eager step"
