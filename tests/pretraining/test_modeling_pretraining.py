"""ElmoForPreTraining: one biLM code path with ElmoModel, stream windows with carried states, the sentence-level
evaluation protocol against a brute-force computation, gradients, saving and loading."""

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoModelForPreTraining

from modeling_elmo import ElmoConfig, ElmoForPreTraining, ElmoLstmStates, ElmoModel
from modeling_elmo.character_ids import BOS_TOKEN, EOS_TOKEN, word_to_char_ids

VOCAB = [BOS_TOKEN, EOS_TOKEN, "<UNK>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
SENTENCES = [["the", "cat", "sat"], ["a", "dog", "ran", "on", "the", "mat"], ["cat"], ["the", "zebra", "sat"]]


def tiny_config(**overrides) -> ElmoConfig:
    values = dict(
        char_embedding_dim=4,
        char_filters=[[1, 4], [2, 8], [3, 8]],
        num_highway_layers=1,
        lstm_cell_size=12,
        projection_dim=6,
        num_hidden_layers=2,
        cell_clip=3.0,
        proj_clip=3.0,
        max_characters_per_token=12,
        lm_vocab_size=len(VOCAB),
        lm_num_negative_samples=None,
        lm_dropout=0.0,
    )
    return ElmoConfig(**{**values, **overrides})


def word_id(word: str) -> int:
    return VOCAB.index(word) if word in VOCAB else VOCAB.index("<UNK>")


def window(tokens: list[list[str]], width: int) -> torch.Tensor:
    """Character ids (rows, steps, width) of token rows of equal length."""
    return torch.tensor([[word_to_char_ids(token, width) for token in row] for row in tokens])


def sentence_windows(sentences: list[list[str]], width: int):
    """One window per sentence as bilm-tf streams it: `<S> w1 .. wn` -> `w1 .. wn </S>` and the reverse."""
    forward = [[BOS_TOKEN, *words] for words in sentences]
    forward_labels = [[*words, EOS_TOKEN] for words in sentences]
    backward = [[EOS_TOKEN, *words[::-1]] for words in sentences]
    backward_labels = [[*words[::-1], BOS_TOKEN] for words in sentences]
    return {
        "input_ids": window(forward, width),
        "backward_input_ids": window(backward, width),
        "labels": torch.tensor([[word_id(w) for w in row] for row in forward_labels]),
        "backward_labels": torch.tensor([[word_id(w) for w in row] for row in backward_labels]),
    }


def padded_batch(sentences: list[list[str]], width: int) -> dict[str, torch.Tensor]:
    longest = max(map(len, sentences))
    input_ids = torch.zeros(len(sentences), longest, width, dtype=torch.long)
    mask = torch.zeros(len(sentences), longest, dtype=torch.long)
    labels = torch.zeros(len(sentences), longest, dtype=torch.long)
    for row, words in enumerate(sentences):
        input_ids[row, : len(words)] = window([words], width)[0]
        mask[row, : len(words)] = 1
        labels[row, : len(words)] = torch.tensor([word_id(w) for w in words])
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


@pytest.fixture
def model() -> ElmoForPreTraining:
    torch.manual_seed(0)
    return ElmoForPreTraining(tiny_config()).eval()


def test_biLM_outputs_equal_elmo_model_for_the_same_weights(model):
    """Windows `<S> w1 .. wn </S>` from zero states give ElmoModel's top layer at the words (one code path)."""
    sentence = SENTENCES[1]
    forward = window([[BOS_TOKEN, *sentence, EOS_TOKEN]], 12)
    backward = window([[EOS_TOKEN, *sentence[::-1], BOS_TOKEN]], 12)
    with torch.no_grad():
        output = model(input_ids=forward, backward_input_ids=backward)
        reference = ElmoModel(model.config, add_scalar_mixes=False).eval()
        reference.load_state_dict(model.elmo.state_dict())
        expected = reference(window([sentence], 12)).last_hidden_state[0]  # (words, 2 * dim)
    forward_words = output.forward_hidden_state[0, 1:-1]
    backward_words = output.backward_hidden_state[0, 1:-1].flip(0)
    torch.testing.assert_close(torch.cat([forward_words, backward_words], dim=-1), expected, rtol=0, atol=1e-6)


def test_a_sentence_split_across_windows_sees_the_state_of_its_first_part(model):
    """In training mode (dropout 0 here) each call continues the streams of the previous one."""
    batch = sentence_windows([SENTENCES[1], ["the", "dog", "sat", "on", "a", "mat"]], 12)
    model.train()
    with torch.no_grad():
        whole = model(**batch)
        model.reset_stream_states()
        first = model(**{name: value[:, :3] for name, value in batch.items()})
        second = model(**{name: value[:, 3:] for name, value in batch.items()})
        model.reset_stream_states()
        fresh = model(**{name: value[:, 3:] for name, value in batch.items()})
    for name in ("forward_hidden_state", "backward_hidden_state"):
        split = torch.cat([getattr(first, name), getattr(second, name)], dim=1)
        torch.testing.assert_close(split, getattr(whole, name), rtol=0, atol=1e-6)
        assert (getattr(fresh, name) - getattr(whole, name)[:, 3:]).abs().max() > 1e-3  # the carried state matters
    model.eval()  # eval calls start from zero states and keep the stored ones
    with torch.no_grad():
        stored = model.stream_states
        evaluated = model(**{name: value[:, 3:] for name, value in batch.items()})
    assert model.stream_states is stored
    torch.testing.assert_close(evaluated.forward_hidden_state, fresh.forward_hidden_state, rtol=0, atol=0)


def test_explicit_states_continue_the_streams_in_eval_mode(model):
    """`states=` carries the streams from one call to the next whatever the mode; `stream_states` stay untouched."""
    batch = sentence_windows([SENTENCES[1], ["the", "dog", "sat", "on", "a", "mat"]], 12)
    stored = model.stream_states
    states = ElmoLstmStates(model.config)
    with torch.no_grad():
        whole = model(**batch)
        first = model(**{name: value[:, :3] for name, value in batch.items()}, states=states)
        second = model(**{name: value[:, 3:] for name, value in batch.items()}, states=states)
    assert states.num_rows == 2 and model.stream_states is stored and stored.num_rows == 0
    for name in ("forward_hidden_state", "backward_hidden_state"):
        split = torch.cat([getattr(first, name), getattr(second, name)], dim=1)
        torch.testing.assert_close(split, getattr(whole, name), rtol=0, atol=1e-6)
    with pytest.raises(TypeError, match="ElmoLstmStates made for this model"):
        model.stream_states = [tuple(layer) for layer in states.layers]


def test_sentence_perplexity_equals_a_brute_force_computation(model):
    batch = padded_batch(SENTENCES, 12)
    with torch.no_grad():
        nll = model.sentence_negative_log_likelihoods(**batch, bos=0, eos=1)
    assert nll.shape == (2, sum(len(s) + 1 for s in SENTENCES))

    weight, bias = (model.softmax.weight.detach().double().numpy(), model.softmax.bias.detach().double().numpy())
    totals = np.zeros(2)
    for sentence in SENTENCES:  # each sentence alone, through the stream-window path, softmax in float64
        model.reset_stream_states()
        windows = sentence_windows([sentence], 12)
        with torch.no_grad():
            output = model(input_ids=windows["input_ids"], backward_input_ids=windows["backward_input_ids"])
        for direction, (hidden, labels) in enumerate(
            [
                (output.forward_hidden_state, windows["labels"]),
                (output.backward_hidden_state, windows["backward_labels"]),
            ]
        ):
            logits = hidden[0].double().numpy() @ weight.T + bias
            log_norm = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
            totals[direction] += float((log_norm - logits[np.arange(len(logits)), labels[0].numpy()]).sum())
    np.testing.assert_allclose(nll.double().sum(dim=1).numpy(), totals, rtol=1e-6)


def test_out_of_vocabulary_targets_count_as_unk(model):
    batch = padded_batch([["the", "zebra", "sat"]], 12)
    assert batch["labels"][0, 1] == VOCAB.index("<UNK>")
    with torch.no_grad():
        nll = model.sentence_negative_log_likelihoods(**batch, bos=0, eos=1)
        windows = sentence_windows([["the", "zebra", "sat"]], 12)
        model.reset_stream_states()
        output = model(**windows)
    torch.testing.assert_close(nll.mean(dim=1), torch.stack([output.forward_loss, output.backward_loss]))


@pytest.mark.parametrize("num_negatives", [None, 4])
def test_gradcheck_through_char_cnn_bilm_clips_and_loss(num_negatives):
    torch.manual_seed(1)
    config = tiny_config(
        lm_num_negative_samples=num_negatives, cell_clip=0.2, proj_clip=0.05, lstm_cell_size=5, projection_dim=3
    )
    model = ElmoForPreTraining(config).double().train()
    batch = sentence_windows([SENTENCES[0], ["dog", "ran", "on"]], 12)
    parameters = [
        model.elmo.char_encoder.convolutions[0].weight,
        model.elmo.char_encoder.highways[0].transform_gate.bias,
        model.elmo.char_encoder.projection.weight,
        model.elmo.bilm.layers[0].weight_ih,
        model.elmo.bilm.layers[1].weight_hh,
        model.elmo.bilm.layers[1].weight_proj,
        model.softmax.weight,
        model.softmax.bias,
    ]
    first_layer_outputs = []
    model.elmo.bilm.layers[0].register_forward_hook(
        lambda module, args, output: first_layer_outputs.append(output[0].detach().abs().max())
    )

    def loss(*values):
        torch.manual_seed(2)  # the same negatives on every evaluation
        replaced = {id(parameter): value for parameter, value in zip(parameters, values, strict=True)}
        weights = {name: replaced.get(id(parameter), parameter) for name, parameter in model.named_parameters()}
        model.reset_stream_states()
        return torch.func.functional_call(model, weights, args=(), kwargs=batch).loss

    inputs = [parameter.detach().clone().requires_grad_() for parameter in parameters]
    assert torch.autograd.gradcheck(loss, inputs, eps=1e-6, atol=1e-5)
    assert max(first_layer_outputs) == pytest.approx(0.05)  # the projection clip was active


def test_save_and_load_with_auto_classes(model, tmp_path):
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForPreTraining.from_pretrained(tmp_path)
    assert isinstance(reloaded, ElmoForPreTraining)
    assert all(torch.equal(value, reloaded.state_dict()[name]) for name, value in model.state_dict().items())
    embedder = AutoModel.from_pretrained(tmp_path)
    assert isinstance(embedder, ElmoModel)
    assert all(torch.equal(value, embedder.state_dict()[name]) for name, value in model.elmo.state_dict().items())


def test_continued_pretraining_starts_from_an_elmo_model_with_a_fresh_softmax(tmp_path):
    torch.manual_seed(3)
    body = ElmoModel(tiny_config(lm_vocab_size=None))
    body.save_pretrained(tmp_path)
    model, info = ElmoForPreTraining.from_pretrained(tmp_path, lm_vocab_size=len(VOCAB), output_loading_info=True)
    assert sorted(info["missing_keys"]) == ["softmax.bias", "softmax.weight"]
    assert not info["unexpected_keys"]
    assert all(torch.equal(value, model.elmo.state_dict()[name]) for name, value in body.state_dict().items())
    assert torch.isfinite(model.softmax.weight).all() and model.softmax.weight.std() > 0.1


def test_clear_errors(model):
    with pytest.raises(ValueError, match="lm_vocab_size"):
        ElmoForPreTraining(tiny_config(lm_vocab_size=None))
    batch = sentence_windows([SENTENCES[0]], 12)
    with pytest.raises(ValueError, match="backward_input_ids must have the shape"):
        model(input_ids=batch["input_ids"], backward_input_ids=batch["backward_input_ids"][:, :2])
    with pytest.raises(ValueError, match=r"labels must be in \[0, 10\], found 11"):
        model(**{**batch, "labels": torch.full_like(batch["labels"], len(VOCAB))})
    with pytest.raises(ValueError, match="Give both labels and backward_labels"):
        model(input_ids=batch["input_ids"], backward_input_ids=batch["backward_input_ids"], labels=batch["labels"])


def test_the_character_projection_stays_the_identity_when_bilm_tf_has_none():
    """Filters giving projection_dim features: bilm-tf writes no CNN_proj, so training must keep it the identity."""
    config = tiny_config(char_filters=[[1, 2], [2, 4]])
    assert sum(count for _, count in config.char_filters) == config.projection_dim
    model = ElmoForPreTraining(config).train()
    projection = model.elmo.char_encoder.projection
    assert torch.equal(projection.weight, torch.eye(6)) and not projection.bias.any()
    highway = model.elmo.char_encoder.highways[0].transform.weight.detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model(**sentence_windows([SENTENCES[0]], 12)).loss.backward()
    optimizer.step()
    assert torch.equal(projection.weight, torch.eye(6)) and not projection.bias.any()
    assert not torch.equal(model.elmo.char_encoder.highways[0].transform.weight, highway)  # the rest trained
