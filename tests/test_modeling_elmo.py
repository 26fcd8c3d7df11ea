"""ElmoModel against the original TensorFlow outputs (../shared/fixtures) and its own properties."""

import inspect
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from model_inputs import reference_implementation
from transformers import AutoConfig, AutoModel

from modeling_elmo import ElmoConfig, ElmoModel, reference_implementations
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.engine.lstm_engine import LstmEngine
from modeling_elmo.modeling_elmo import ElmoLstmLayer

ORIGINAL_TOLERANCE = 2e-6
BATCH_INDEPENDENCE_TOLERANCE = 1e-5


def encode(sentences: list[list[str]], pad_to: int | None = None, left: bool = False) -> dict[str, torch.Tensor]:
    """Character ids and mask for pre-split sentences, built straight from the character-id rules."""
    width = max([len(s) for s in sentences] + [pad_to or 0])
    input_ids = torch.zeros(len(sentences), width, 50, dtype=torch.long)
    attention_mask = torch.zeros(len(sentences), width, dtype=torch.long)
    for row, words in enumerate(sentences):
        start = width - len(words) if left else 0
        for column, word in enumerate(words, start=start):
            input_ids[row, column] = torch.tensor(word_to_char_ids(word))
            attention_mask[row, column] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask}


@pytest.fixture(scope="module")
def fixture_sentences(fixture_dir) -> list[list[list[str]]]:
    with open(fixture_dir / "sentences.json") as handle:
        return [[sentence.split() for sentence in group] for group in json.load(handle)]


@pytest.fixture(scope="module")
def expected_top_layers(fixture_dir) -> list[list[np.ndarray]]:
    """expected[k][i]: top layer (n_words, 32) of sentence i of list k, from the original code."""
    expected = []
    for k in range(3):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected.append([np.concatenate(list(handle[str(i)][...]), axis=-1) for i in range(10)])
    return expected


def run_fixture_batches(model, sentences, expected, num_batches: int = 10) -> float:
    """Max abs error of the top layer over the batches; NaN if any output is NaN (`<=` then fails)."""
    errors = []
    with torch.no_grad():
        for i in range(num_batches):
            batch = [sentences[k][i] for k in range(3)]
            top = model(**encode(batch)).last_hidden_state
            for k in range(3):
                assert expected[k][i].shape == (len(batch[k]), 32)
                errors.append(np.abs(top[k, : len(batch[k])].numpy() - expected[k][i]).max())
    return float(np.max(errors))


@pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])
def test_stateful_reproduces_original_for_all_batches(
    converted_fixture, fixture_sentences, expected_top_layers, reference
):
    model = ElmoModel.from_pretrained(converted_fixture, stateful=True)
    with reference_implementation(model, enabled=reference):
        assert run_fixture_batches(model, fixture_sentences, expected_top_layers) <= ORIGINAL_TOLERANCE


@pytest.mark.parametrize("stateful", [False, True], ids=["stateless", "stateful"])
def test_model_without_inference_engine_reproduces_original(
    converted_fixture, fixture_sentences, expected_top_layers, stateful
):
    """The reference paths alone (the CPU inference engines of the biLM and the character CNN disabled) are a correct
    model."""
    model = ElmoModel.from_pretrained(converted_fixture, stateful=stateful)
    model.set_implementation("eager")
    num_batches = 10 if stateful else 1  # stateless: only the first batch starts from the original's zero states
    assert run_fixture_batches(model, fixture_sentences, expected_top_layers, num_batches) <= ORIGINAL_TOLERANCE


def test_stateless_reproduces_original_first_batch(converted_fixture, fixture_sentences, expected_top_layers):
    model = AutoModel.from_pretrained(converted_fixture)
    assert not model.config.stateful
    assert run_fixture_batches(model, fixture_sentences, expected_top_layers, num_batches=1) <= ORIGINAL_TOLERANCE


def test_stateless_is_not_the_stateful_original_on_later_batches(
    converted_fixture, fixture_sentences, expected_top_layers
):
    """Proves the stateful test can fail: without carried states batches 1..9 differ from the original."""
    model = AutoModel.from_pretrained(converted_fixture)
    assert run_fixture_batches(model, fixture_sentences, expected_top_layers) > 1e-2


def test_stateless_outputs_do_not_depend_on_batch(converted_fixture, fixture_sentences):
    model = AutoModel.from_pretrained(converted_fixture)
    target = fixture_sentences[1][3]
    others = [fixture_sentences[k][i] for k, i in [(0, 0), (2, 5), (0, 7), (1, 1), (2, 9), (0, 4)]]
    with torch.no_grad():
        alone = model(**encode([target])).last_hidden_state[0]
        in_batch = model(**encode(others[:4] + [target] + others[4:])).last_hidden_state[4, : len(target)]
        padded = model(**encode([target, others[0]], pad_to=len(target) + 17)).last_hidden_state[0]
        left_padded = model(**encode([target, others[0]], pad_to=80, left=True)).last_hidden_state[0, -len(target) :]
        twice = model(**encode([target])).last_hidden_state[0]
    for other in (in_batch, padded[: len(target)], left_padded, twice):
        assert float((other - alone).abs().max()) <= BATCH_INDEPENDENCE_TOLERANCE
    assert torch.count_nonzero(padded[len(target) :]) == 0


def test_hidden_states_layout(converted_fixture, fixture_sentences):
    model = AutoModel.from_pretrained(converted_fixture)
    batch = encode([fixture_sentences[0][2], ["short", "one"]])
    with torch.no_grad():
        output = model(**batch, output_hidden_states=True)
        plain = model(**batch)
    assert plain.hidden_states is None
    assert len(output.hidden_states) == model.config.num_hidden_layers + 1
    for layer in output.hidden_states:
        assert layer.shape == (2, len(fixture_sentences[0][2]), 2 * model.config.projection_dim)
        assert torch.count_nonzero(layer[1, 2:]) == 0
    token_layer = output.hidden_states[0]
    half = model.config.projection_dim
    torch.testing.assert_close(token_layer[..., :half], token_layer[..., half:], rtol=0, atol=0)
    torch.testing.assert_close(output.last_hidden_state, output.hidden_states[-1], rtol=0, atol=0)
    as_tuple = model(**batch, return_dict=False)
    torch.testing.assert_close(as_tuple[0], plain.last_hidden_state)


@pytest.mark.parametrize("norm_scope", [None, "sentence", "batch"], ids=["no-norm", "sentence-norm", "batch-norm"])
def test_scalar_mixes(converted_fixture, fixture_sentences, norm_scope):
    model = ElmoModel.from_pretrained(
        converted_fixture,
        num_output_representations=2,
        scalar_mix_layer_norm=norm_scope is not None,
        scalar_mix_layer_norm_scope=norm_scope or "sentence",
    )
    with torch.no_grad():
        model.scalar_mixes[1].scalar_parameters.copy_(torch.tensor([0.5, -1.0, 2.0]))
        model.scalar_mixes[1].gamma.fill_(1.7)
    batch = encode([fixture_sentences[2][1], ["a", "b", "c"]])
    mask = batch["attention_mask"].bool()
    with torch.no_grad():
        output = model(**batch, output_hidden_states=True)
    assert len(output.elmo_representations) == 2

    def normalised(layer: torch.Tensor) -> torch.Tensor:
        """The layer normalised with the mean and variance of its words: per sentence, or over the whole batch."""
        if norm_scope is None:
            return layer
        rows = [(row, row + 1) for row in range(len(layer))] if norm_scope == "sentence" else [(0, len(layer))]
        parts = []
        for start, end in rows:
            values = layer[start:end][mask[start:end]]
            parts.append((layer[start:end] - values.mean()) / torch.sqrt(values.var(unbiased=False) + 1e-12))
        return torch.cat(parts)

    for mix, representation in zip(model.scalar_mixes, output.elmo_representations, strict=True):
        weights = torch.softmax(mix.scalar_parameters.detach(), dim=0).tolist()
        expected = sum(weight * normalised(layer) for weight, layer in zip(weights, output.hidden_states, strict=True))
        expected = mix.gamma.item() * expected * mask.unsqueeze(-1)
        torch.testing.assert_close(representation, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_scope", ["sentence", "batch"])
def test_layer_normed_mix_depends_on_the_batch_only_over_the_batch(converted_fixture, fixture_sentences, norm_scope):
    model = ElmoModel.from_pretrained(
        converted_fixture,
        num_output_representations=1,
        scalar_mix_layer_norm=True,
        scalar_mix_layer_norm_scope=norm_scope,
    )
    target, other = fixture_sentences[0][4], fixture_sentences[1][2]
    with torch.no_grad():
        alone = model(**encode([target])).elmo_representations[0][0]
        in_batch = model(**encode([target, other])).elmo_representations[0][0, : len(target)]
    difference = float((in_batch - alone).abs().max())
    if norm_scope == "sentence":
        assert difference <= BATCH_INDEPENDENCE_TOLERANCE
    else:
        assert difference > 1e-3  # AllenNLP's semantics: the other sentence moves the mean and variance


def test_new_configs_normalise_per_sentence_and_older_saved_ones_over_the_batch(converted_fixture, tmp_path):
    assert ElmoConfig(scalar_mix_layer_norm=True).scalar_mix_layer_norm_scope == "sentence"
    ElmoModel.from_pretrained(
        converted_fixture, num_output_representations=1, scalar_mix_layer_norm=True
    ).save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["scalar_mix_layer_norm_scope"] == "sentence"
    del saved["scalar_mix_layer_norm_scope"]  # as written before the field existed
    (tmp_path / "config.json").write_text(json.dumps(saved))
    assert AutoConfig.from_pretrained(tmp_path).scalar_mix_layer_norm_scope == "batch"
    assert AutoModel.from_pretrained(tmp_path).scalar_mixes[0].norm_dims == (0, 1, 2)
    overridden = ElmoConfig.from_pretrained(tmp_path, scalar_mix_layer_norm_scope="sentence")
    assert overridden.scalar_mix_layer_norm_scope == "sentence"
    # a saved config that did not normalise had nothing to keep: switching it on now gives the new default
    (tmp_path / "config.json").write_text(json.dumps({**saved, "scalar_mix_layer_norm": False}))
    assert ElmoConfig.from_pretrained(tmp_path, scalar_mix_layer_norm=True).scalar_mix_layer_norm_scope == "sentence"


def test_stateful_with_changing_batch_size(converted_fixture, fixture_sentences):
    """Row i continues from stored row i; new rows start from zero; stored rows beyond the batch are kept."""
    first = [fixture_sentences[k][0] for k in range(3)]
    second = [fixture_sentences[k][1] for k in range(3)]
    shrinking = ElmoModel.from_pretrained(converted_fixture, stateful=True)
    full = ElmoModel.from_pretrained(converted_fixture, stateful=True)
    stateless = ElmoModel.from_pretrained(converted_fixture)
    with torch.no_grad():
        shrinking(**encode(first))
        full(**encode(first))
        after_first = [state.clone() for state in shrinking._lstm_states.layers[0]]
        small = shrinking(**encode(second[:2])).last_hidden_state
        expected = full(**encode(second)).last_hidden_state[:2, : small.shape[1]]
        torch.testing.assert_close(small, expected, rtol=0, atol=1e-6)
        for stored, before in zip(shrinking._lstm_states.layers[0], after_first, strict=True):
            torch.testing.assert_close(stored[:, 2], before[:, 2], rtol=0, atol=0)

        growing = ElmoModel.from_pretrained(converted_fixture, stateful=True)
        growing(**encode(first[:1]))
        grown = growing(**encode(second)).last_hidden_state
        fresh_row = stateless(**encode(second[2:])).last_hidden_state[0]
        torch.testing.assert_close(grown[2, : len(second[2])], fresh_row, rtol=0, atol=1e-6)

        growing.reset_states()
        reset = growing(**encode(second)).last_hidden_state
        torch.testing.assert_close(reset, stateless(**encode(second)).last_hidden_state, rtol=0, atol=1e-6)


def test_empty_sentences(converted_fixture):
    model = AutoModel.from_pretrained(converted_fixture)
    with torch.no_grad():
        mixed = model(**encode([[], ["Hello", "world"]])).last_hidden_state
        alone = model(**encode([["Hello", "world"]])).last_hidden_state
        only_empty = model(**encode([[], []]), output_hidden_states=True)
    assert torch.count_nonzero(mixed[0]) == 0
    torch.testing.assert_close(mixed[1], alone[0], rtol=0, atol=BATCH_INDEPENDENCE_TOLERANCE)
    assert only_empty.last_hidden_state.shape == (2, 0, 32)


def test_invalid_inputs_give_clear_errors(converted_fixture):
    model = AutoModel.from_pretrained(converted_fixture)
    with pytest.raises(ValueError, match="Empty batch"):
        model(input_ids=torch.zeros(0, 3, 50, dtype=torch.long))
    with pytest.raises(ValueError, match=r"input_ids must have shape \(batch_size, num_words, 50\)"):
        model(input_ids=torch.zeros(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        model(input_ids=torch.zeros(2, 3, 50, dtype=torch.long), attention_mask=torch.ones(2, 4))


@pytest.mark.parametrize("bad_id", [262, 300, -1])
def test_character_ids_out_of_range_are_named(converted_fixture, bad_id):
    model = AutoModel.from_pretrained(converted_fixture)
    input_ids = encode([["The", "bank"]])["input_ids"]
    input_ids[0, 1, 3] = bad_id
    with pytest.raises(ValueError, match=rf"input_ids must be in \[0, 261\], found {bad_id}"):
        model(input_ids=input_ids)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bool])
def test_non_integer_input_ids_are_refused(converted_fixture, dtype):
    model = AutoModel.from_pretrained(converted_fixture)
    with pytest.raises(TypeError, match=f"input_ids must hold integer ids .*got dtype {dtype}"):
        model(input_ids=encode([["The", "bank"]])["input_ids"].to(dtype))


def test_meta_device_inputs_are_refused(converted_fixture):
    model = AutoModel.from_pretrained(converted_fixture)
    batch = encode([["The", "bank"]])
    with pytest.raises(ValueError, match="input_ids is on the meta device"):
        model(input_ids=batch["input_ids"].to("meta"))
    with pytest.raises(ValueError, match="attention_mask must hold 1 for words and 0 for padding"):
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"].to("meta"))


def test_attention_mask_values_other_than_0_and_1_are_refused(converted_fixture):
    model = AutoModel.from_pretrained(converted_fixture)
    batch = encode([["The", "bank"]])
    with pytest.raises(ValueError, match="attention_mask must hold 1 for words and 0 for padding"):
        model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"] * 2)


def test_attention_mask_is_derived_from_padding(converted_fixture, fixture_sentences):
    model = AutoModel.from_pretrained(converted_fixture)
    batch = encode([fixture_sentences[0][5], ["x"]])
    with torch.no_grad():
        with_mask = model(**batch).last_hidden_state
        without = model(input_ids=batch["input_ids"]).last_hidden_state
    torch.testing.assert_close(with_mask, without, rtol=0, atol=0)


def test_auto_classes_and_bit_exact_round_trip(converted_fixture, tmp_path, fixture_sentences):
    from transformers import AutoTokenizer

    from modeling_elmo.tokenization_elmo import ElmoTokenizer

    assert isinstance(AutoConfig.from_pretrained(converted_fixture), ElmoConfig)
    assert isinstance(AutoTokenizer.from_pretrained(converted_fixture), ElmoTokenizer)
    model = AutoModel.from_pretrained(converted_fixture)
    assert isinstance(model, ElmoModel)
    model.save_pretrained(tmp_path / "again")
    again = AutoModel.from_pretrained(tmp_path / "again")
    for (name, tensor), (other_name, other) in zip(
        model.state_dict().items(), again.state_dict().items(), strict=True
    ):
        assert name == other_name and tensor.dtype == torch.float32
        assert torch.equal(tensor, other), name
    batch = encode([fixture_sentences[1][7]])
    with torch.no_grad():
        assert torch.equal(model(**batch).last_hidden_state, again(**batch).last_hidden_state)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_loading(converted_fixture, fixture_sentences, dtype):
    full = AutoModel.from_pretrained(converted_fixture)
    half = AutoModel.from_pretrained(converted_fixture, dtype=dtype)
    assert next(half.parameters()).dtype == dtype
    batch = encode([fixture_sentences[0][1], fixture_sentences[2][2]])
    with torch.no_grad():
        expected = full(**batch).last_hidden_state
        found = half(**batch).last_hidden_state
    assert found.dtype == dtype
    assert float((found.float() - expected).abs().max()) < 0.1


def test_gradients_flow_in_training(converted_fixture, fixture_sentences):
    model = AutoModel.from_pretrained(converted_fixture)
    model.train()
    output = model(**encode([fixture_sentences[0][3], ["tiny"]]), output_hidden_states=True)
    sum(layer.sum() for layer in output.hidden_states).backward()
    for name, parameter in model.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name


def test_every_hidden_state_is_on_the_autograd_graph(converted_fixture, fixture_sentences):
    """Gradient attribution on any layer: `retain_grad()` on a returned layer gets the gradient of the output."""
    model = AutoModel.from_pretrained(converted_fixture)
    batch = encode([fixture_sentences[0][3], ["tiny", "one"]])
    mask = batch["attention_mask"].bool()
    half = model.config.projection_dim
    output = model(**batch, output_hidden_states=True)
    for layer in output.hidden_states:
        layer.retain_grad()
    output.last_hidden_state.pow(2).sum().backward()
    for index, layer in enumerate(output.hidden_states):
        assert layer.grad is not None, f"hidden_states[{index}] is not on the graph"
        word_gradients = layer.grad[mask].abs()
        # both directions read the layer below, each its own half ([x; x] for the token layer)
        assert (word_gradients[:, :half].sum(-1) > 0).all() and (word_gradients[:, half:].sum(-1) > 0).all(), index
        assert torch.count_nonzero(layer.grad[~mask]) == 0, index


def test_resize_token_embeddings_keeps_the_character_vocabulary(converted_fixture, tmp_path):
    """The character vocabulary is fixed: resizing it used to succeed and save a checkpoint that cannot be reloaded.
    Growing for added tokens (flair's context marker) needs no rows: the embedding is returned unchanged."""
    model = AutoModel.from_pretrained(converted_fixture)
    embeddings = model.get_input_embeddings()
    with pytest.raises(ValueError, match=r"character vocabulary is fixed \(262 character ids\).*asked for 200 rows"):
        model.resize_token_embeddings(200)
    with pytest.raises(ValueError, match="pad_to_multiple_of=64"):
        model.resize_token_embeddings(262, pad_to_multiple_of=64)
    assert model.resize_token_embeddings() is embeddings and model.resize_token_embeddings(262) is embeddings
    assert model.resize_token_embeddings(model.config.vocab_size + 1) is embeddings
    assert embeddings.num_embeddings == model.config.vocab_size == model.config.char_vocab_size == 262
    model.save_pretrained(tmp_path)
    AutoModel.from_pretrained(tmp_path)


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradient_checkpointing_gives_the_same_gradients(
    converted_fixture, fixture_sentences, monkeypatch, use_reentrant
):
    """
    Every biLM layer is checkpointed: its forward runs again in the backward pass. The gradients equal those without
    checkpointing (the same computation runs again); with `use_reentrant=True` the first pass runs without autograd
    (the inference path), so they agree up to float32 rounding (2e-7 of the largest gradient here).
    """
    model = AutoModel.from_pretrained(converted_fixture).train()
    assert model.supports_gradient_checkpointing
    batch = encode([fixture_sentences[0][3], fixture_sentences[2][7], ["tiny"]])
    runs = []
    # the two recurrences behind ElmoLstmLayer.forward: the reference one and the inference engine's
    for owner, name in ((reference_implementations, "recurrence"), (LstmEngine, "run")):
        function = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *args, function=function: runs.append(1) or function(*args))

    def gradients() -> dict[str, torch.Tensor]:
        model.zero_grad()
        runs.clear()
        output = model(**batch, output_hidden_states=True)
        sum(layer.pow(2).sum() for layer in output.hidden_states).backward()
        return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}

    expected = gradients()
    assert len(runs) == model.config.num_hidden_layers
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": use_reentrant})
    found = gradients()
    assert len(runs) == 2 * model.config.num_hidden_layers
    for name, gradient in expected.items():  # up to float32 rounding of the tensor's largest gradient
        assert float((found[name] - gradient).abs().max()) <= 1e-6 * float(gradient.abs().max()), name


def test_checkpoints_with_the_old_highway_gate_name_load_and_resave_with_the_new_one(converted_fixture, tmp_path):
    """Folders converted before `carry` was renamed `transform_gate` (the transform gate) load unchanged."""
    from safetensors.torch import load_file, save_file

    model = ElmoModel.from_pretrained(converted_fixture)
    model.save_pretrained(tmp_path / "old")
    weights = tmp_path / "old" / "model.safetensors"
    state = load_file(weights)
    assert any(".transform_gate." in name for name in state)
    save_file({name.replace(".transform_gate.", ".carry."): value for name, value in state.items()}, weights)
    old, info = ElmoModel.from_pretrained(tmp_path / "old", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert all(torch.equal(value, old.state_dict()[name]) for name, value in model.state_dict().items())
    old.save_pretrained(tmp_path / "new")
    assert set(load_file(tmp_path / "new" / "model.safetensors")) == set(state)


def test_checkpoints_with_the_forget_bias_folded_in_load_with_the_same_outputs(
    converted_fixture, fixture_sentences, tmp_path
):
    """Folders saved before `lstm_forget_bias` existed stored TensorFlow's `B + 1.0` on the forget gate."""
    from safetensors.torch import load_file, save_file

    model = ElmoModel.from_pretrained(converted_fixture)
    assert model.config.lstm_forget_bias == 1.0
    model.save_pretrained(tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    for name in [name for name in state if name.endswith(".bias") and ".bilm.layers." in f".{name}"]:
        state[name].view(2, 4, -1)[:, 2] += 1.0  # fold the forget bias in, as the converter used to
    save_file(state, tmp_path / "model.safetensors")
    config = json.loads((tmp_path / "config.json").read_text())
    del config["lstm_forget_bias"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    old = AutoModel.from_pretrained(tmp_path)
    assert old.config.lstm_forget_bias == 0.0
    batch = encode(fixture_sentences[0][:3])
    with torch.no_grad():
        expected = model(**batch, output_hidden_states=True).hidden_states
        for reference in (False, True):
            with reference_implementation(old, enabled=reference):
                actual = old(**batch, output_hidden_states=True).hidden_states
            assert max(float((a - e).abs().max()) for a, e in zip(actual, expected, strict=True)) <= 1e-6


def test_model_file_names_no_engine_machinery():
    """The model file holds the math and one switch per engine: the engines' own words stay in their modules."""
    lines = Path(inspect.getfile(ElmoLstmLayer)).read_text(encoding="utf-8").lower().splitlines()
    # (the imports that Transformers 4.x needs to copy the engines' modules with the remote code name them)
    text = "\n".join(line for line in lines if not line.endswith("(4.x remote code)"))
    for name in ("onednn", "mkldnn", "thread", "snapshot", "probe", "compress"):
        assert name not in text, name


def test_stream_windows_are_refused_with_padding_empty_or_bad_ids(converted_fixture):
    model = ElmoModel.from_pretrained(converted_fixture)
    windows = encode([["a", "b"], ["c", "d"]])["input_ids"]
    with pytest.raises(ValueError, match="give no attention_mask with backward_input_ids"):
        model(windows, torch.ones(2, 2), backward_input_ids=windows)
    with pytest.raises(ValueError, match=r"unroll_steps >= 1: input_ids has shape \(2, 0, 50\)"):
        model(windows[:, :0], backward_input_ids=windows[:, :0])
    with pytest.raises(ValueError, match=r"backward_input_ids must be in \[0, 261\], found 999"):
        model(windows, backward_input_ids=windows.clone().fill_(999))
