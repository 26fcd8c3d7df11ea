"""The model's readiness for CUDA, proven on a CPU (issue 37, item 2): the eager recurrence and the packing make the
host wait for nothing inside the time loop (`host_syncs` records what would), the input-to-gate products come in
bounded chunks with the bits of one product, the character CNN's convolutions run in exact float32 on CUDA unless
the user opts in ("eager_tf32"), and carried LSTM states follow the device of the call."""

import json
import threading

import h5py
import numpy as np
import pytest
import torch
from host_syncs import HostSyncs
from model_inputs import char_ids

import modeling_elmo.modeling_elmo as modeling
from modeling_elmo import ElmoModel, reference_implementations
from modeling_elmo.convolution_precision import Fp32Convolutions, fp32_convolutions
from modeling_elmo.lstm_states import ElmoLstmStates
from modeling_elmo.modeling_elmo import ElmoLstmLayer
from modeling_elmo.packed_sentences import pack_sentences
from modeling_elmo.reference_implementations import input_gate_chunks

ORIGINAL_TOLERANCE = 2e-6
ONE_PRODUCT = 10**9  # a chunk bound no input reaches: all steps' input-to-gate products at once, as before chunking


@pytest.fixture(scope="module")
def fixture_batches(fixture_dir) -> list[tuple[list[list[str]], list[np.ndarray]]]:
    """The fixture's 10 batches of 3 sentences and the original's top layer of each sentence (n_words, 32)."""
    with open(fixture_dir / "sentences.json") as handle:
        groups = [[sentence.split() for sentence in group] for group in json.load(handle)]
    expected = []
    for k in range(3):
        with h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") as handle:
            expected.append([np.concatenate(list(handle[str(i)][...]), axis=-1) for i in range(10)])
    return [([groups[k][i] for k in range(3)], [expected[k][i] for k in range(3)]) for i in range(10)]


def stateful_layers(model: ElmoModel, batches, grad: bool = False) -> tuple[list[tuple[torch.Tensor, ...]], float]:
    """All layers of every fixture batch (states carried), and the top layer's max abs error against the original."""
    model.reset_states()
    layers, errors = [], []
    with torch.set_grad_enabled(grad):
        for sentences, expected in batches:
            mask = torch.tensor([[1] * len(s) + [0] * (max(map(len, sentences)) - len(s)) for s in sentences])
            output = model(char_ids(sentences), attention_mask=mask, output_hidden_states=True)
            layers.append(tuple(layer.detach() for layer in output.hidden_states))
            for row, words in enumerate(expected):
                errors.append(np.abs(layers[-1][-1][row, : len(words)].numpy() - words).max())
    return layers, float(max(errors))


def test_input_gate_chunks_keep_the_order_and_bound_the_rows():
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        count = int(torch.randint(1, 40, (1,), generator=generator))
        lengths = sorted(torch.randint(1, 60, (count,), generator=generator).tolist(), reverse=True)
        batch_sizes = [sum(length > step for length in lengths) for step in range(lengths[0])]
        max_rows = int(torch.randint(1, 200, (1,), generator=generator))
        chunks = input_gate_chunks(batch_sizes, max_rows)
        assert [size for chunk in chunks for size in chunk] == batch_sizes
        assert all(sum(chunk) <= 5 * max_rows / 4 or len(chunk) == 1 for chunk in chunks)
        assert all(2 * sum(chunk) > max_rows for chunk in chunks[:-1])
        assert len(chunks) == 1 or 4 * sum(chunks[-1]) >= max_rows
        if sum(batch_sizes) <= max_rows:
            assert len(chunks) == 1
    assert input_gate_chunks([3, 3, 2, 1], 9) == [[3, 3, 2, 1]]
    assert input_gate_chunks([4, 4, 4, 1], 8) == [[4, 4], [4, 1]]
    assert input_gate_chunks([4, 4, 4, 4, 1], 8) == [[4, 4], [4, 4, 1]]  # 1 row alone would be a product of its own


@pytest.mark.parametrize("grad", [False, True], ids=["inference", "autograd"])
def test_eager_chunks_give_the_bits_of_one_product(converted_fixture, fixture_batches, monkeypatch, grad):
    """ "eager" on the fixture (stateful, all layers): chunks of 16, 24 and 32 rows give the bits of the code path
    before chunking (one product of all steps), and each matches the original within 2e-6."""
    model = ElmoModel.from_pretrained(converted_fixture, stateful=True)
    model.set_implementation("eager")
    model.requires_grad_(grad)
    first = pack_sentences(char_ids(fixture_batches[0][0]).ne(0).any(dim=-1))
    assert len(input_gate_chunks(first.batch_sizes, 16)) > 2  # the fixture's batches really are split
    results = {}
    for rows in (ONE_PRODUCT, 16, 24, 32):
        monkeypatch.setattr(reference_implementations, "INPUT_GATE_CHUNK_ROWS", rows)
        results[rows] = stateful_layers(model, fixture_batches, grad)
        assert results[rows][1] <= ORIGINAL_TOLERANCE
    one_product = results[ONE_PRODUCT][0]
    for rows in (16, 24, 32):
        assert all(
            torch.equal(chunked, whole)
            for batch, whole_batch in zip(results[rows][0], one_product, strict=True)
            for chunked, whole in zip(batch, whole_batch, strict=True)
        ), rows


def test_eager_chunks_compute_no_more_than_a_chunk_of_gates(monkeypatch):
    """The input-to-gate products are made a chunk at a time, the next one only once its first step is reached."""
    torch.manual_seed(0)
    layer = ElmoLstmLayer(modeling.ElmoConfig(projection_dim=4, lstm_cell_size=8, num_hidden_layers=1))
    for weight in layer.parameters():
        torch.nn.init.uniform_(weight, -0.5, 0.5)
    batch_sizes = [5, 5, 4, 4, 3, 2, 2, 1]
    inputs = torch.randn(2, sum(batch_sizes), 4)
    products = []
    real_bmm = torch.bmm

    def recorded_bmm(left, right):
        if right is layer.weight_ih:
            products.append(left.shape[1])
        return real_bmm(left, right)

    monkeypatch.setattr(torch, "bmm", recorded_bmm)
    monkeypatch.setattr(reference_implementations, "INPUT_GATE_CHUNK_ROWS", 10)
    steps = reference_implementations.input_gate_steps(layer.weights(), inputs, batch_sizes)
    assert next(steps).shape == (2, 5, 32) and products == [10]
    assert [step.shape[1] for step in steps] == batch_sizes[1:] and products == [10, 8, 8]


def test_eager_time_loop_waits_for_nothing(converted_fixture, fixture_batches):
    """The biLM's eager layers, with states carried in and out, read no value from a tensor and make nothing of a
    data-dependent size: on CUDA the host queues every step without waiting."""
    model = ElmoModel.from_pretrained(converted_fixture)
    model.set_implementation("eager")
    sentences = fixture_batches[0][0]
    packing = pack_sentences(char_ids(sentences).ne(0).any(dim=-1))
    inputs = torch.randn(2, sum(packing.batch_sizes), model.config.projection_dim)
    states = ElmoLstmStates(model.config)
    with torch.no_grad(), HostSyncs() as syncs:
        initial = states.initial(len(sentences), inputs, packing.sort_order)
        _, final_states = model.bilm(inputs, packing.batch_sizes, initial)
        states.update(final_states, packing.sort_order)
    assert syncs.calls == []


def reference_packing(mask: torch.Tensor) -> dict:
    """The packing of `mask` (batch, words) built step by step in Python, to check `pack_sentences` against."""
    rows = [[column for column, flag in enumerate(row) if flag] for row in mask.tolist()]
    lengths = [len(words) + 2 for words in rows]
    order = sorted(range(len(rows)), key=lambda row: -lengths[row])  # stable
    first_word = [sum(map(len, rows[:row])) for row in range(len(rows))]
    total = sum(map(len, rows))
    batch_sizes, source, tokens, to_packed = [], [[], []], [[], []], [[0] * total, [0] * total]
    for step in range(max(lengths)):
        active = [row for row in order if lengths[row] > step]
        batch_sizes.append(len(active))
        for row in active:
            for direction, position in enumerate((step, lengths[row] - 1 - step)):
                word = first_word[row] + position - 1
                is_boundary = position in (0, lengths[row] - 1)
                source[direction].append(total + (position != 0) if is_boundary else word)
                tokens[direction].append(row * (mask.shape[1] + 2) + position)
                if not is_boundary:
                    to_packed[direction][word] = len(source[direction]) - 1
    positions = [row * mask.shape[1] + column for row, words in enumerate(rows) for column in words]
    return {
        "batch_sizes": batch_sizes, "sort_order": order, "source": source, "word_to_packed": to_packed,
        "word_positions": positions, "token_positions": tokens,
    }  # fmt: skip


def test_packing_reads_one_value_and_builds_the_same_maps():
    """`pack_sentences` on masks with empty rows, left padding and one word: the maps of the step-by-step packing,
    with one value read from the device (the sorted lengths, for `batch_sizes`)."""
    generator = torch.Generator().manual_seed(0)
    masks = [torch.tensor([[1]]), torch.tensor([[0, 0], [0, 1], [1, 1]]), torch.tensor([[0, 0, 0]])]
    masks += [torch.rand(batch, words, generator=generator) < 0.6 for batch, words in [(3, 7), (8, 20), (1, 5)]]
    for mask in masks:
        with HostSyncs() as syncs:
            packing = pack_sentences(mask)
        assert syncs.calls == ["tolist"]
        built = {name: getattr(packing, name) for name in reference_packing(mask)}
        assert {name: value if isinstance(value, list) else value.tolist() for name, value in built.items()} == (
            reference_packing(mask)
        )


def test_model_call_waits_as_often_for_thirty_words_as_for_two(converted_fixture):
    """A whole stateful "eager" call reads values from the device a fixed number of times, before the biLM runs: as
    many for 30 words a row as for 2, none per time step."""
    model = ElmoModel.from_pretrained(converted_fixture, stateful=True)
    model.set_implementation("eager")
    words = "the quick brown fox jumps over a lazy dog".split() * 4
    calls = {}
    for count in (2, 30):
        batch = char_ids([words[:count], words[1 : count // 2 + 1]])
        with torch.no_grad():
            model(batch)  # the first call makes the boundary tokens' ids on the device
            with HostSyncs() as syncs:
                model(batch, output_hidden_states=True)
        calls[count] = syncs.calls
    # the ids' range and the mask's values (2), the packing's lengths, the distinct words, their chunks' widths
    assert calls[2] == calls[30] == ["__bool__", "__bool__", "tolist", "unique", "tolist"]


@pytest.fixture
def user_setting():
    """cuDNN's float32 convolution setting set to PyTorch's default (TF32 allowed) for the test, put back after:
    (where it lives, its name, the exact value, the TF32 value)."""
    owner, name, exact = Fp32Convolutions._setting()
    tf32 = "tf32" if name == "fp32_precision" else True
    before = getattr(owner, name)
    setattr(owner, name, tf32)
    yield owner, name, exact, tf32
    setattr(owner, name, before)


def record_convolution_precision(monkeypatch) -> list[object]:
    """cuDNN's float32 convolution setting seen by every convolution of the character CNN, in order."""
    seen = []
    owner, name, _ = Fp32Convolutions._setting()
    real_conv1d = torch.nn.functional.conv1d

    def conv1d(*args, **kwargs):
        seen.append(getattr(owner, name))
        return real_conv1d(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "conv1d", conv1d)
    return seen


@pytest.mark.parametrize("name, expected", [("eager", "exact"), ("eager_tf32", "cudnn's")])
def test_char_cnn_convolutions_are_exact_on_cuda_unless_opted_in(
    converted_fixture, monkeypatch, user_setting, name, expected
):
    """With the inputs on CUDA (mocked: the device type the implementation reads) and PyTorch's default TF32
    convolutions, "eager" runs each convolution in exact float32 and puts the setting back; "eager_tf32" leaves it."""
    owner, setting, exact, tf32 = user_setting
    monkeypatch.setattr(reference_implementations, "device_type", lambda tensor: "cuda")
    seen = record_convolution_precision(monkeypatch)
    model = ElmoModel.from_pretrained(converted_fixture)
    model.set_implementation(name)
    with torch.no_grad():
        model(char_ids([["a", "sentence"], ["another"]]))
    assert len(seen) == len(model.char_encoder.convolutions)
    assert set(seen) == ({exact} if expected == "exact" else {tf32})
    assert getattr(owner, setting) == tf32


def test_char_cnn_convolutions_untouched_on_cpu(converted_fixture, monkeypatch, user_setting):
    owner, setting, _, _ = user_setting
    seen = record_convolution_precision(monkeypatch)
    model = ElmoModel.from_pretrained(converted_fixture)
    model.set_implementation("eager")
    before = getattr(owner, setting)
    with torch.no_grad():
        model(char_ids([["words"]]))
    assert seen and set(seen) == {before}


def test_exact_convolutions_from_several_threads_restore_the_setting_once(user_setting):
    """Calls overlapping in two threads: exact while either is inside, the user's setting back after the last."""
    owner, setting, exact, user = user_setting
    first_inside, second_inside, first_may_leave = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first() -> None:
        with fp32_convolutions():
            first_inside.set()
            first_may_leave.wait(10)

    thread = threading.Thread(target=first)
    thread.start()
    first_inside.wait(10)
    with fp32_convolutions():
        second_inside.set()
        first_may_leave.set()
        thread.join(10)
        seen["after the first left"] = getattr(owner, setting)
    assert seen["after the first left"] == exact
    assert getattr(owner, setting) == user


def test_carried_states_follow_the_device_and_dtype_of_the_call():
    """States stored on one device (or dtype) start a call on another, and rows kept beyond the batch move with
    the new ones: the meta device stands in for CUDA (no values needed)."""
    config = modeling.ElmoConfig(projection_dim=4, lstm_cell_size=8, num_hidden_layers=1)
    stored = [(torch.ones(2, 3, 4, dtype=torch.float64), torch.ones(2, 3, 8, dtype=torch.float64))]
    states = ElmoLstmStates(config, stored)
    like = torch.empty(0, device="meta")
    ((hidden, cell),) = states.initial(2, like, torch.tensor([1, 0], device="meta"))
    assert (hidden.device.type, hidden.dtype, cell.device.type, cell.dtype) == ("meta", torch.float32) * 2
    states.update([(hidden, cell)], torch.tensor([1, 0], device="meta"))
    ((hidden, cell),) = states.layers
    assert hidden.device.type == cell.device.type == "meta" and hidden.shape[1] == cell.shape[1] == 3
