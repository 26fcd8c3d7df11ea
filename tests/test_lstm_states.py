"""`ElmoLstmStates` and `states=`: the original's stateful outputs through an explicit states object, the row rules
(AllenNLP's `_EncoderBase`: row i continues stored row i, new rows start from zero, stored rows beyond the batch are
kept, a row without tokens keeps its state), resetting, detaching, and refusals."""

import functools

import pytest
import torch
from model_inputs import reference_implementation
from test_modeling_elmo import ORIGINAL_TOLERANCE, encode, expected_top_layers, fixture_sentences, run_fixture_batches

from modeling_elmo import (
    ElmoConfig,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
    ElmoLstmStates,
    ElmoModel,
)
from modeling_elmo.finetuning.activation_cache import ElmoActivationCache

__all__ = ["expected_top_layers", "fixture_sentences"]  # module fixtures shared with test_modeling_elmo

CONFIG = ElmoConfig(num_hidden_layers=2, projection_dim=3, lstm_cell_size=5)


def stored(rows: int, start: float) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer, distinct non-zero hidden (2, rows, 3) and cell (2, rows, 5) values."""
    return [
        (
            torch.arange(6 * rows, dtype=torch.float).view(2, rows, 3) + start + 100 * layer,
            torch.arange(10 * rows, dtype=torch.float).view(2, rows, 5) + start + 100 * layer,
        )
        for layer in range(2)
    ]


@pytest.mark.parametrize("reference", [False, True], ids=["fast", "reference"])
def test_explicit_states_reproduce_the_stateful_original(
    converted_fixture, fixture_sentences, expected_top_layers, reference
):
    model = ElmoModel.from_pretrained(converted_fixture)
    assert not model.config.stateful
    states = ElmoLstmStates(model.config)
    with reference_implementation(model, enabled=reference):
        error = run_fixture_batches(functools.partial(model, states=states), fixture_sentences, expected_top_layers)
    assert error <= ORIGINAL_TOLERANCE
    assert states.num_rows == 3


def test_explicit_states_equal_the_stateful_config_bit_for_bit(converted_fixture, fixture_sentences):
    stateful = ElmoModel.from_pretrained(converted_fixture, stateful=True)
    explicit = ElmoModel.from_pretrained(converted_fixture)
    states = ElmoLstmStates(explicit.config)
    with torch.no_grad():
        for index in range(4):
            batch = encode([fixture_sentences[k][index] for k in range(3)][: 3 - index % 2])
            expected = stateful(**batch, output_hidden_states=True)
            found = explicit(**batch, output_hidden_states=True, states=states)
            assert found.states is states and expected.states is stateful._lstm_states
            assert all(map(torch.equal, found.hidden_states, expected.hidden_states))
    assert all(map(torch.equal, sum(states.layers, ()), sum(stateful._lstm_states.layers, ())))


def test_a_shorter_batch_continues_its_rows_and_keeps_the_others(converted_fixture, fixture_sentences):
    model = ElmoModel.from_pretrained(converted_fixture)
    first, second = ([fixture_sentences[k][i] for k in range(3)] for i in (0, 1))
    shrinking, full = ElmoLstmStates(model.config), ElmoLstmStates(model.config)
    with torch.no_grad():
        model(**encode(first), states=shrinking)
        model(**encode(first), states=full)
        kept = [tensor[:, 2].clone() for tensor in sum(shrinking.layers, ())]
        small = model(**encode(second[:2]), states=shrinking).last_hidden_state
        expected = model(**encode(second), states=full).last_hidden_state[:2, : small.shape[1]]
    torch.testing.assert_close(small, expected, rtol=0, atol=1e-6)
    assert shrinking.num_rows == 3
    after = sum(shrinking.layers, ())
    assert all(torch.equal(tensor[:, 2], before) for tensor, before in zip(after, kept, strict=True))


def test_rows_beyond_the_stored_ones_start_from_zero(converted_fixture, fixture_sentences):
    model = ElmoModel.from_pretrained(converted_fixture)
    first, second = ([fixture_sentences[k][i] for k in range(3)] for i in (0, 1))
    states = ElmoLstmStates(model.config)
    with torch.no_grad():
        model(**encode(first[:1]), states=states)
        grown = model(**encode(second), states=states).last_hidden_state
        fresh = model(**encode(second[2:])).last_hidden_state[0]
        continued = model(**encode(second[:1])).last_hidden_state[0]
    torch.testing.assert_close(grown[2, : len(second[2])], fresh, rtol=0, atol=1e-6)
    assert (grown[0, : len(second[0])] - continued).abs().max() > 1e-3  # row 0 did continue from its state
    assert states.num_rows == 3


def test_initial_takes_stored_rows_then_zeros_in_the_given_order():
    states = ElmoLstmStates(CONFIG, stored(rows=2, start=1.0))
    like = torch.empty(0, dtype=torch.float64)
    (hidden, cell), _ = states.initial(3, like)
    assert hidden.dtype == torch.float64 and hidden.shape == (2, 3, 3) and cell.shape == (2, 3, 5)
    assert torch.equal(hidden[:, :2], states.layers[0][0].double()) and not hidden[:, 2].any()
    order = torch.tensor([2, 0, 1])
    (sorted_hidden, sorted_cell), _ = states.initial(3, like, order)
    assert torch.equal(sorted_hidden, hidden[:, order]) and torch.equal(sorted_cell, cell[:, order])
    (hidden, _), _ = states.initial(1, like)
    assert torch.equal(hidden, states.layers[0][0][:, :1].double())


def test_update_stores_final_rows_keeps_rows_beyond_and_rows_without_tokens():
    states = ElmoLstmStates(CONFIG, stored(rows=3, start=1.0))
    previous = [tuple(tensor.clone() for tensor in layer) for layer in states.layers]
    final = stored(rows=2, start=-50.0)  # a call on 2 rows, in sorted order: position 0 is row 1
    order = torch.tensor([1, 0])
    states.update(final, order, lengths=torch.tensor([0, 4]))  # row 0 had no tokens
    for (hidden, cell), (old_hidden, old_cell), (new_hidden, new_cell) in zip(
        states.layers, previous, final, strict=True
    ):
        assert hidden.shape == (2, 3, 3) and cell.shape == (2, 3, 5)
        assert torch.equal(hidden[:, 1], new_hidden[:, 0]) and torch.equal(cell[:, 1], new_cell[:, 0])
        assert torch.equal(hidden[:, 0], old_hidden[:, 0]) and torch.equal(cell[:, 0], old_cell[:, 0])
        assert torch.equal(hidden[:, 2], old_hidden[:, 2]) and torch.equal(cell[:, 2], old_cell[:, 2])


def test_a_new_row_without_tokens_stays_zero():
    states = ElmoLstmStates(CONFIG, stored(rows=1, start=1.0))
    states.update(stored(rows=2, start=7.0), lengths=torch.tensor([3, 0]))
    hidden, cell = states.layers[1]
    assert not hidden[:, 1].any() and not cell[:, 1].any()
    assert torch.equal(hidden[:, 0], stored(rows=2, start=7.0)[1][0][:, 0])


def test_reset_all_or_some_rows():
    states = ElmoLstmStates(CONFIG, stored(rows=3, start=1.0))
    given = states.layers[0][0]
    states.reset(torch.tensor([True, False, True, True]))  # a mask longer than the stored rows: beyond is zero
    for hidden, cell in states.layers:
        assert not hidden[:, [0, 2]].any() and not cell[:, [0, 2]].any() and hidden[:, 1].all() and cell[:, 1].all()
    assert given.all()  # the tensors it was given are not changed in place
    states.reset([1])
    assert not any(tensor.any() for tensor in sum(states.layers, ()))
    states.reset()
    assert states.layers is None and states.num_rows == 0
    with pytest.raises(ValueError, match="non-negative row indices"):
        states.reset([-1])


def test_stored_states_are_detached(converted_fixture, fixture_sentences):
    model = ElmoModel.from_pretrained(converted_fixture)
    states = ElmoLstmStates(model.config)
    first, second = ([fixture_sentences[k][i] for k in range(3)] for i in (0, 1))
    model(**encode(first), states=states).last_hidden_state.sum().backward()
    assert not any(tensor.requires_grad for tensor in sum(states.layers, ()))
    model(**encode(second), states=states).last_hidden_state.sum().backward()  # no second pass through call one


def test_states_come_last_in_the_tuple_output(converted_fixture, fixture_sentences):
    model = ElmoModel.from_pretrained(converted_fixture)
    states = ElmoLstmStates(model.config)
    with torch.no_grad():
        output = model(**encode([fixture_sentences[0][0]]), states=states, return_dict=False)
        stateless = model(**encode([fixture_sentences[0][0]]))
    assert output[-1] is states and len(output) == 2
    assert stateless.states is None


def test_states_of_another_shape_are_refused(converted_fixture, fixture_sentences):
    model = ElmoModel.from_pretrained(converted_fixture)
    batch = encode([fixture_sentences[0][0]])
    with pytest.raises(TypeError, match="ElmoLstmStates made for this model"):
        model(**batch, states=ElmoLstmStates(CONFIG))
    with pytest.raises(TypeError, match="ElmoLstmStates made for this model"):
        model(**batch, states=stored(rows=1, start=0.0))
    with pytest.raises(ValueError, match=r"layer 1 must have shapes \(\(2, 2, 3\), \(2, 2, 5\)\)"):
        ElmoLstmStates(CONFIG, [stored(rows=2, start=0.0)[0], (torch.ones(2, 1, 3), torch.ones(2, 1, 5))])
    with pytest.raises(ValueError, match="2 \\(hidden, cell\\) pairs"):
        ElmoLstmStates(CONFIG, stored(rows=2, start=0.0)[:1])


def test_sentence_boundaries_are_the_windows_of_the_same_tokens(converted_fixture, fixture_sentences):
    """`keep_sentence_boundaries=True` gives every token of `<S> words </S>` from position 0; each direction there is
    the stream-window path's on the same tokens (the backward window reads them reversed)."""
    model = ElmoModel.from_pretrained(converted_fixture)
    sentences = [fixture_sentences[0][2], fixture_sentences[1][0][:3]]
    with torch.no_grad():
        bounded = model(**encode(sentences), keep_sentence_boundaries=True, output_hidden_states=True)
        plain = model(**encode(sentences), output_hidden_states=True)
        for row, words in enumerate(sentences):
            tokens = encode([["<S>", *words, "</S>"]])["input_ids"]
            tokens[0, 0], tokens[0, -1] = model.char_encoder.boundary_char_ids(tokens.device)
            windows = model(tokens, backward_input_ids=tokens.flip(1), output_hidden_states=True)
            length, dim = len(words) + 2, model.config.projection_dim
            for found, expected, words_only in zip(
                bounded.hidden_states, windows.hidden_states, plain.hidden_states, strict=True
            ):
                assert found.shape == (2, max(map(len, sentences)) + 2, 2 * dim)
                torch.testing.assert_close(found[row, :length, :dim], expected[0, :, :dim], rtol=0, atol=1e-6)
                torch.testing.assert_close(found[row, :length, dim:], expected[0, :, dim:].flip(0), rtol=0, atol=1e-6)
                assert torch.equal(found[row, 1 : length - 1], words_only[row, : len(words)])
                assert not found[row, length:].any()


@pytest.mark.parametrize("head", [ElmoForTokenClassification, ElmoForSequenceClassification])
def test_heads_pass_states_to_their_biLM(converted_fixture, fixture_sentences, head):
    stateful = head.from_pretrained(converted_fixture, num_labels=3, stateful=True).eval()
    explicit = head.from_pretrained(converted_fixture, num_labels=3).eval()
    explicit.load_state_dict(stateful.state_dict())
    states = ElmoLstmStates(explicit.config)
    with torch.no_grad():
        for index in range(3):
            batch = encode([fixture_sentences[k][index] for k in range(3)])
            assert torch.equal(explicit(**batch, states=states).logits, stateful(**batch).logits)
    assert all(map(torch.equal, sum(states.layers, ()), sum(stateful.elmo._lstm_states.layers, ())))
    explicit.activation_cache = ElmoActivationCache(explicit)
    with pytest.raises(ValueError, match="activation cache holds layers computed from zero states"):
        explicit(**batch, states=states)
