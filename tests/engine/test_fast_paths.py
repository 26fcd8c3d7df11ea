"""The fast inference paths of ElmoModel against the straightforward ones: in-place recurrence (oneDNN products on x86
CPUs, torch.mm elsewhere) and differentiable fast path vs the per-step TF-formulation reference (in float32 and
float64), the char CNN once per distinct word vs per word, the word cache, and precomputed token-embedding tables."""

import copy
import pickle

import pytest
import torch
from model_inputs import char_ids as _char_ids
from model_inputs import drop_thread_probe_calls, record_onednn_calls, reference_implementation, set_lstm_inference
from model_inputs import random_model as _model
from transformers import Trainer, TrainingArguments

from modeling_elmo import ElmoModel, reference_implementations
from modeling_elmo.character_ids import word_to_char_ids
from modeling_elmo.conversion.testing_utils import ARCHITECTURES
from modeling_elmo.embed.token_embeddings import load_token_embedding_table, read_token_embedding_table
from modeling_elmo.engine.cpu_linear import onednn_linear_applies
from modeling_elmo.engine.lstm_engine import LstmEngine
from modeling_elmo.formats.original_checkpoint import load_original_checkpoint
from modeling_elmo.modeling_elmo import ElmoCharacterEncoder
from modeling_elmo.packed_sentences import PackedBatch
from modeling_elmo.word_embedding_store import WordEmbeddingStore, word_keys

TOLERANCE = 2e-6  # float32 paths summing in other orders: 1.2e-6 (10 ulps at 1.4) measured on an AVX2 AMD EPYC
WORDS = "the bank closed its doors . river boats go by Zürich naïve café 日本語 ! a , of".split()
LONG_WORD = "pneumonoultramicroscopicsilicovolcanoconiosis-and-then-some-more-letters"  # cut at 48 bytes


def _sentences(seed: int, count: int, max_words: int) -> list[list[str]]:
    generator = torch.Generator().manual_seed(seed)
    vocabulary = [*WORDS, LONG_WORD]
    sentences = []
    for _ in range(count):
        length = int(torch.randint(1, max_words + 1, (1,), generator=generator))
        sentences.append([vocabulary[int(i)] for i in torch.randint(len(vocabulary), (length,), generator=generator)])
    return sentences


def _layers(model: ElmoModel, ids: torch.Tensor, reference: bool, grad: bool = False) -> tuple[torch.Tensor, ...]:
    with reference_implementation(model, enabled=reference), torch.set_grad_enabled(grad):
        return model(ids, output_hidden_states=True).hidden_states


def _max_difference(left: tuple[torch.Tensor, ...], right: tuple[torch.Tensor, ...]) -> float:
    """Max abs difference over all layers; NaN if any value is NaN (compare with `<=`, which NaN fails)."""
    return float(torch.stack([(a - b).detach().abs().amax() for a, b in zip(left, right, strict=True)]).amax())


ARCHITECTURE_CASES = {
    "tiny": {},
    "clipping-active": {"cell_clip": 0.5, "proj_clip": 0.25},
    "no-clip-no-skip": {"cell_clip": None, "proj_clip": None, "use_skip_connections": False, "n_layers": 3},
    "small-shape": {"dim": 1024, "projection_dim": 128, "n_highway": 1, "char_dim": 16, "filters": [[1, 32], [7, 64]]},
}


@pytest.fixture
def onednn_calls(monkeypatch) -> list[torch.Size]:
    """Records the input shape of every oneDNN linear call."""
    return record_onednn_calls(monkeypatch)


@pytest.fixture
def lstm_onednn_calls(monkeypatch) -> list[torch.Size]:
    """Records the input shape of every oneDNN linear call of the biLM's inference recurrence (not the char CNN's),
    leaving out those of the thread-count probe of automatic threads (`same_results_at`, once per process and
    shape)."""
    calls = record_onednn_calls(monkeypatch, lstm_only=True)
    drop_thread_probe_calls(monkeypatch, calls)
    return calls


@pytest.fixture(params=["onednn", "bmm"])
def backend(request, monkeypatch) -> str:
    """The inference products, forced on every layer the test builds (`LstmEngine.products`): oneDNN (x86
    CPUs, float32) or `bmm` (everywhere else; oneDNN switched off)."""
    if request.param == "onednn" and not onednn_linear_applies(torch.zeros(1), torch.zeros(1)):
        pytest.skip("oneDNN's linear is used on x86 CPUs only")
    monkeypatch.setattr(torch.backends.mkldnn, "enabled", request.param == "onednn")
    init = LstmEngine.__init__

    def init_with_products(self, *args):
        init(self, *args)
        self.products = request.param

    monkeypatch.setattr(LstmEngine, "__init__", init_with_products)
    return request.param


@pytest.mark.parametrize("architecture", ARCHITECTURE_CASES.values(), ids=ARCHITECTURE_CASES.keys())
@pytest.mark.parametrize("block_rows", [3, LstmEngine.INPUT_GATE_BLOCK_ROWS])
def test_fast_paths_match_reference(random_checkpoint, monkeypatch, backend, architecture, block_rows):
    monkeypatch.setattr(LstmEngine, "INPUT_GATE_BLOCK_ROWS", block_rows)  # 3: many input-gate blocks
    model = _model(random_checkpoint, seed=1, **architecture)
    ids = _char_ids(_sentences(seed=0, count=9, max_words=25))
    reference = _layers(model, ids, reference=True)
    assert _max_difference(reference, _layers(model, ids, reference=False)) <= TOLERANCE
    assert _max_difference(reference, _layers(model, ids, reference=False, grad=True)) <= TOLERANCE


def test_fast_path_matches_float64_reference(random_checkpoint, backend, onednn_calls):
    """
    Wider LSTM products (512 inputs, 2048 cells): the float32 rounding of the paths shows, so they are held to the
    exact values (the reference path in float64). MKL's float32 products (`bmm` on CPUs) are the less accurate ones
    here (the float32 reference path itself is 1.06e-6 off), so the `bmm` path gets the float32 bound of 2e-6.
    """
    model = _model(random_checkpoint, seed=10, dim=2048, projection_dim=512, n_highway=1, filters=[[1, 32], [3, 64]])
    ids = _char_ids(_sentences(seed=11, count=6, max_words=20))
    fast = tuple(layer.double() for layer in _layers(model, ids, reference=False))
    assert bool(onednn_calls) == (backend == "onednn")
    exact = _layers(copy.deepcopy(model).double(), ids, reference=True)
    assert _max_difference(fast, exact) <= (TOLERANCE if backend == "onednn" else 2e-6)


@pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN:UserWarning")
def test_onednn_is_used_per_direction_with_weights_packed_once(
    random_checkpoint, onednn_calls, lstm_onednn_calls, monkeypatch
):
    model = _model(random_checkpoint, seed=18)
    if not onednn_linear_applies(model.bilm.layers[0].weight_hh, torch.zeros(1)):
        pytest.skip("oneDNN's linear is used on x86 CPUs only")
    set_lstm_inference(model, "packed")  # "auto" may take `bmm`, and measures both with more oneDNN calls
    ids = _char_ids(_sentences(seed=19, count=3, max_words=8))
    packings = []
    reorder = torch.ops.mkldnn._reorder_linear_weight
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", lambda *args: packings.append(1) or reorder(*args))
    expected = _layers(model, ids, reference=True)
    for _ in range(2):
        assert _max_difference(_layers(model, ids, reference=False), expected) <= TOLERANCE
    # per layer and direction: 1 input-to-gate block, then per step the recurrent and projection products
    num_steps = int((ids != 0).any(dim=-1).sum(dim=1).max()) + 2
    assert len(lstm_onednn_calls) == 2 * len(model.bilm.layers) * 2 * (1 + 2 * num_steps)
    assert all(shape[0] == 1 for shape in lstm_onednn_calls)  # one direction at a time
    assert len(packings) == len(model.bilm.layers) * 2 * 2  # recurrent + projection per direction, once for 2 calls
    with torch.no_grad():
        model.bilm.layers[1].weight_proj[0, 0, 0] += 1.0  # one value: the layer's weights are packed again
    _layers(model, ids, reference=False)
    assert len(packings) == (len(model.bilm.layers) + 1) * 2 * 2
    onednn_calls.clear()
    with torch.backends.mkldnn.flags(enabled=False):
        assert _max_difference(_layers(model, ids, reference=False), _layers(model, ids, reference=True)) <= TOLERANCE
    assert not onednn_calls  # switched off: `bmm`


# optimizers the Trainer offers that run on a CPU with this project's dependencies (`--optim NAME`)
TRAINER_OPTIMIZERS = ["adamw_torch", "adamw_torch_fused", "adafactor", "sgd", "adagrad", "rmsprop"]
TORCH_OPTIMIZERS = {
    "adamw-fused": lambda params: torch.optim.AdamW(params, lr=0.05, fused=True),
    "adamw-foreach": lambda params: torch.optim.AdamW(params, lr=0.05, foreach=True),
    "adamw-for-loop": lambda params: torch.optim.AdamW(params, lr=0.05, foreach=False),
    "sgd-fused": lambda params: torch.optim.SGD(params, lr=0.5, fused=True),
    "adagrad-fused": lambda params: torch.optim.Adagrad(params, lr=0.5, fused=True),
}


def _trainer_optimizer(name: str):
    def make(params):
        args = TrainingArguments(output_dir="unused", optim=name, learning_rate=0.05, use_cpu=True, report_to=[])
        optimizer_class, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
        return optimizer_class(params, **kwargs)

    return make


OPTIMIZERS = {**{name: _trainer_optimizer(name) for name in TRAINER_OPTIMIZERS}, **TORCH_OPTIMIZERS}


def _assert_inference_follows(model: ElmoModel, ids: torch.Tensor, change) -> None:
    """After `change()`, the inference path (packed weights, word cache) gives the reference path's new outputs."""
    if onednn_linear_applies(model.bilm.layers[0].weight_hh, torch.zeros(1)):
        set_lstm_inference(model, "packed")  # packed weights kept between calls (the default keeps none)
    model.set_word_cache(max_words=1000)
    before = _layers(model, ids, reference=True)
    for _ in range(2):  # the second call would be served from anything kept between calls
        assert _max_difference(before, _layers(model, ids, reference=False)) <= TOLERANCE
    change()
    expected = _layers(model, ids, reference=True)
    assert not _max_difference(before, expected) <= 100 * TOLERANCE  # the change shows in every layer's outputs
    assert _max_difference(expected, _layers(model, ids, reference=False)) <= TOLERANCE


@pytest.mark.parametrize("optimizer", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
def test_inference_after_an_optimizer_step_uses_the_new_weights(random_checkpoint, optimizer):
    """Fused optimizers update parameters without bumping their version counters: nothing may go stale."""
    model = _model(random_checkpoint, seed=12)
    ids = _char_ids(_sentences(seed=13, count=4, max_words=12))
    step = optimizer(model.parameters())

    def train_step():
        model(ids).last_hidden_state.pow(2).mean().backward()
        step.step()

    _assert_inference_follows(model, ids, train_step)


def test_inference_follows_every_other_kind_of_weight_change(random_checkpoint):
    model = _model(random_checkpoint, seed=12)
    other = _model(random_checkpoint, seed=20).state_dict()
    ids = _char_ids(_sentences(seed=13, count=4, max_words=12))

    def update_in_place():
        with torch.no_grad():
            for layer in model.bilm.layers:
                layer.weight_hh.mul_(1.5)
                layer.weight_proj.copy_(layer.weight_proj + 0.01)
            model.char_encoder.projection.bias.add_(0.5)

    def update_through_data():  # bypasses autograd's version counters
        for parameter in model.parameters():
            parameter.data.mul_(1.1)

    changes = [
        update_in_place,
        update_through_data,
        lambda: model.load_state_dict(other),
        lambda: model.load_state_dict({name: value * 0.9 for name, value in other.items()}, assign=True),
        lambda: model.half().float(),  # new tensors (maybe at recycled addresses), weights rounded to float16
    ]
    for change in changes:
        _assert_inference_follows(model, ids, change)


def test_runs_under_cpu_autocast(random_checkpoint):
    """Under CPU autocast the inputs of the biLM are bfloat16 while its weights stay float32: `bmm` takes over."""
    model = _model(random_checkpoint, seed=21)
    ids = _char_ids(_sentences(seed=22, count=3, max_words=10))
    expected = _layers(model, ids, reference=False)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        found = _layers(model, ids, reference=False)
    assert found[-1].dtype == torch.bfloat16
    assert _max_difference(found, expected) < 0.05


def test_model_built_under_inference_mode_runs(random_checkpoint):
    """Parameters created under `torch.inference_mode()` (no version counter) work, word cache included."""
    config, state = load_original_checkpoint(*random_checkpoint(seed=16))
    ids = _char_ids(_sentences(seed=17, count=3, max_words=10))
    expected = _layers(_model(random_checkpoint, seed=16), ids, reference=True)
    with torch.inference_mode():
        model = ElmoModel(config)
        model.load_state_dict(state)
        model.eval().set_word_cache(max_words=100)
        assert model.bilm.layers[0].weight_hh.is_inference()
        for _ in range(2):
            assert _max_difference(_layers(model, ids, reference=False), expected) <= TOLERANCE


def test_model_can_be_copied_and_pickled_after_inference(random_checkpoint):
    model = _model(random_checkpoint, seed=14)
    if onednn_linear_applies(model.bilm.layers[0].weight_hh, torch.zeros(1)):
        set_lstm_inference(model, "packed")
    ids = _char_ids(_sentences(seed=15, count=3, max_words=10))
    expected = _layers(model, ids, reference=False)  # builds the packed weights
    for clone in (copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert _max_difference(_layers(clone, ids, reference=False), expected) == 0


def test_reference_implementation_is_chosen_per_block_and_restored_on_errors(random_checkpoint, monkeypatch):
    model = _model(random_checkpoint, seed=23)
    ids = _char_ids(_sentences(seed=24, count=3, max_words=8))
    calls = []
    reference = reference_implementations.reference_lstm_layer
    monkeypatch.setattr(
        reference_implementations, "reference_lstm_layer", lambda *args: calls.append(1) or reference(*args)
    )
    with pytest.raises(RuntimeError, match="interrupted"), reference_implementation(model):
        model(ids)
        raise RuntimeError("interrupted")
    assert len(calls) == len(model.bilm.layers)
    calls.clear()
    model(ids)
    assert calls == []  # the fast path again, although the block ended in an exception
    with reference_implementation(model):
        with reference_implementation(model, enabled=False):
            model(ids)
        assert calls == []
        model(ids)  # the outer block's choice again
    assert len(calls) == len(model.bilm.layers)


def test_inference_pads_only_the_returned_layers(random_checkpoint, monkeypatch):
    """Only the returned layers are padded (the top one unless all are asked for), with autograd or without."""
    model = _model(random_checkpoint, seed=25)
    ids = _char_ids(_sentences(seed=26, count=3, max_words=8))
    padded = []
    pad = PackedBatch.pad
    monkeypatch.setattr(PackedBatch, "pad", lambda self, words: padded.append(1) or pad(self, words))
    num_layers = len(model.bilm.layers) + 1
    for grad, output_hidden_states, expected in [
        (False, False, 1),
        (False, True, num_layers),
        (True, False, 1),
        (True, True, num_layers),
    ]:
        padded.clear()
        with torch.set_grad_enabled(grad):
            model(ids, output_hidden_states=output_hidden_states)
        assert len(padded) == expected, (grad, output_hidden_states)


def test_clipping_is_active_in_the_clipped_case(random_checkpoint):
    model = _model(random_checkpoint, seed=1, **ARCHITECTURE_CASES["clipping-active"])
    layers = _layers(model, _char_ids(_sentences(seed=0, count=4, max_words=20)), reference=False)
    assert float(layers[1].abs().max()) == pytest.approx(0.25)  # the first layer's outputs hit proj_clip


def test_gradients_of_fast_path_match_reference(random_checkpoint):
    model = _model(random_checkpoint, seed=2, **ARCHITECTURE_CASES["clipping-active"])
    ids = _char_ids(_sentences(seed=3, count=5, max_words=12))
    gradients = []
    for reference in (True, False):
        model.zero_grad()
        layers = _layers(model, ids, reference=reference, grad=True)
        sum(layer.pow(2).sum() for layer in layers).backward()
        gradients.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert gradients[0].keys() == gradients[1].keys()
    for name, expected in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], expected, rtol=1e-4, atol=1e-5, msg=name)


def test_stateful_final_states_match_reference(random_checkpoint):
    model = _model(random_checkpoint, seed=3)
    model.config.stateful = True
    batches = [_char_ids(_sentences(seed=seed, count=4, max_words=15)) for seed in (4, 5)]
    outputs = []
    for reference in (True, False):
        model.reset_states()
        outputs.append([_layers(model, ids, reference=reference) for ids in batches])
    for expected, found in zip(*outputs, strict=True):
        assert _max_difference(expected, found) <= TOLERANCE


def test_long_sentence_matches_reference(random_checkpoint):
    model = _model(random_checkpoint, seed=4)
    ids = _char_ids([[WORDS[i % len(WORDS)] for i in range(700)]])
    assert _max_difference(_layers(model, ids, reference=True), _layers(model, ids, reference=False)) <= TOLERANCE


@pytest.mark.parametrize("words_per_chunk", [2, 256])
def test_unique_word_cnn_equals_direct_cnn(random_checkpoint, monkeypatch, words_per_chunk):
    monkeypatch.setattr(ElmoCharacterEncoder, "WORDS_PER_CHUNK", words_per_chunk)
    encoder = _model(random_checkpoint, seed=5).char_encoder
    ids = _char_ids(_sentences(seed=7, count=6, max_words=20)).flatten(0, 1)
    ids = ids[(ids != 0).any(dim=1)]
    assert torch.unique(ids, dim=0).shape[0] < ids.shape[0]  # repeated words
    with torch.no_grad():
        torch.testing.assert_close(encoder.embed_words(ids), encoder(ids), rtol=0, atol=TOLERANCE)
    with torch.enable_grad():
        torch.testing.assert_close(encoder.embed_words(ids), encoder(ids), rtol=0, atol=TOLERANCE)


def test_word_cache_gives_same_outputs_and_stays_bounded(random_checkpoint):
    model = _model(random_checkpoint, seed=6)
    batches = [_char_ids(_sentences(seed=seed, count=3, max_words=10)) for seed in range(4)]
    with torch.no_grad():
        expected = [model(ids).last_hidden_state for ids in batches]
        model.set_word_cache(max_words=6)
        for _ in range(2):  # the second pass is served partly from the cache
            for ids, reference in zip(batches, expected, strict=True):
                torch.testing.assert_close(model(ids).last_hidden_state, reference, rtol=0, atol=TOLERANCE)
                assert 0 < len(model.char_encoder.word_cache) <= 6


def test_word_cache_is_emptied_when_weights_change(random_checkpoint):
    model = _model(random_checkpoint, seed=7)
    ids = _char_ids(_sentences(seed=8, count=3, max_words=10))
    model.set_word_cache(max_words=100)
    with torch.no_grad():
        model(ids)
        model.char_encoder.projection.bias.add_(0.5)  # an optimizer step would do the same
        cached = model(ids).last_hidden_state
        model.set_word_cache(None)
        torch.testing.assert_close(cached, model(ids).last_hidden_state, rtol=0, atol=TOLERANCE)


def test_word_embedding_store_evicts_least_recently_used():
    store = WordEmbeddingStore(capacity=2)
    keys = [b"a", b"b", b"c"]
    store.add(keys[:2], torch.tensor([[1.0], [2.0]]))
    assert store.lookup([b"a"])[0] == [0]  # "a" becomes the most recent
    store.add(keys[2:], torch.tensor([[3.0]]))  # evicts "b"
    found, rows = store.lookup(keys)
    assert found == [0, 2] and rows.flatten().tolist() == [1.0, 3.0]
    with pytest.raises(ValueError, match="capacity"):
        WordEmbeddingStore(capacity=0)


def test_fixture_token_embedding_table_equals_char_cnn(fixture_dir, random_checkpoint):
    config, state = load_original_checkpoint(fixture_dir / "options.json", fixture_dir / "lm_weights.hdf5")
    model = ElmoModel(config)
    model.load_state_dict(state)
    model.eval()
    words, table = read_token_embedding_table(
        fixture_dir / "vocab_test.txt", fixture_dir / "elmo_token_embeddings.hdf5"
    )
    assert {"<S>", "</S>"} <= set(words)
    ids = torch.tensor([word_to_char_ids(word) for word in words])
    with torch.no_grad():
        torch.testing.assert_close(model.char_encoder.embed_words(ids), table, rtol=0, atol=TOLERANCE)
        torch.testing.assert_close(model.char_encoder(ids), table, rtol=0, atol=TOLERANCE)
        sentences = [words[:7], words[100:112], ["not-in-the-table", *words[3:5]]]
        expected = model(_char_ids(sentences), output_hidden_states=True).hidden_states
        load_token_embedding_table(model, fixture_dir / "vocab_test.txt", fixture_dir / "elmo_token_embeddings.hdf5")
        assert len(model.char_encoder.token_embedding_table) == len(words)
        found = model(_char_ids(sentences), output_hidden_states=True).hidden_states
    assert _max_difference(expected, found) <= TOLERANCE
    assert word_keys(ids[:1]) == [ids[0].numpy().tobytes()]


def test_token_embedding_table_shape_is_checked(random_checkpoint):
    model = _model(random_checkpoint)
    with pytest.raises(ValueError, match=r"token embeddings must have shape \(2, 16\)"):
        model.set_token_embedding_table(["a", "b"], torch.zeros(2, 3))
    with pytest.raises(ValueError, match="embeddings hold NaN or infinite values"):
        model.set_token_embedding_table(["a", "b"], torch.full((2, 16), float("nan")))


@pytest.mark.parametrize("content", [b"", b"not an HDF5 file", b"\x89HDF\r\n\x1a\n truncated"])
def test_token_embedding_table_that_is_not_hdf5_is_named(tmp_path, content):
    (tmp_path / "vocab.txt").write_text("a\nb\n")
    (tmp_path / "table.hdf5").write_bytes(content)
    with pytest.raises(ValueError, match="table.hdf5: cannot read it as HDF5"):
        read_token_embedding_table(tmp_path / "vocab.txt", tmp_path / "table.hdf5")


@pytest.mark.parametrize("max_words", [0, -5, 2.5, "100", True])
def test_word_cache_size_must_be_a_positive_int(random_checkpoint, max_words):
    with pytest.raises(ValueError, match="capacity must be a positive number of words"):
        _model(random_checkpoint).set_word_cache(max_words)


@pytest.mark.parametrize("name", ["small"])
def test_bfloat16_runs_close_to_float32(random_checkpoint, name):
    arch = ARCHITECTURES[name]
    model = _model(random_checkpoint, seed=8, dim=arch.dim, projection_dim=arch.projection_dim, n_highway=1)
    ids = _char_ids(_sentences(seed=9, count=4, max_words=12))
    with torch.no_grad():
        expected = model(ids, output_hidden_states=True).hidden_states
        found = model.to(torch.bfloat16)(ids, output_hidden_states=True).hidden_states
    assert all(layer.dtype == torch.bfloat16 for layer in found)
    assert _max_difference(expected, tuple(layer.float() for layer in found)) < 0.5


def test_word_cache_under_cpu_autocast_is_bypassed(random_checkpoint):
    """Rows computed in bfloat16 must neither crash the float32 buffer nor be served later to float32 calls."""
    model = _model(random_checkpoint, seed=23)
    ids = _char_ids(_sentences(seed=24, count=3, max_words=10))
    expected = _layers(model, ids, reference=False)
    model.set_word_cache(max_words=100)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert _layers(model, ids, reference=False)[-1].dtype == torch.bfloat16
    assert _max_difference(_layers(model, ids, reference=False), expected) <= TOLERANCE


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore")
def test_torch_compile_gives_the_eager_outputs(random_checkpoint):
    """Inductor cannot lower oneDNN's linear ops: inside `torch.compile` the products go through `bmm`."""
    model = _model(random_checkpoint, seed=27)
    ids = _char_ids(_sentences(seed=28, count=3, max_words=6))
    expected = _layers(model, ids, reference=False)
    compiled = torch.compile(model)
    with torch.no_grad():
        found = compiled(ids, output_hidden_states=True).hidden_states
    assert _max_difference(found, expected) <= 1e-5
