"""ELMoForManyLangs' embedding computation transcribed from its code, straight from its own state dicts and lexicons
(EFML ids, EFML parameter layout): the reference that `elmo-convert --from elmoformanylangs --verify` compares a
converted model with. One sentence at a time, from zero LSTM states.
"""

import torch
from torch.nn import functional

from ..formats.efml import ENCODER_FILE, TOKEN_EMBEDDER_FILE, EfmlArchitecture


def efml_batch_ids(
    sentence: list[str], chars: dict[str, int], words: dict[str, int] | None, max_chars: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """EFML's `read_list` + `create_one_batch` for one sentence: `<bos> w1 .. wn <eos>`, words cut to
    `max_chars - 2`; character rows `[id(<eow>), c1 .. cn, id(<bow>), id(<pad>) ...]` (its crossed markers).
    Returns char ids (n + 2, max_chars) and word ids (n + 2,) or `None`."""
    tokens = ["<bos>", *(word[: max_chars - 2] if len(word) + 2 > max_chars else word for word in sentence), "<eos>"]
    char_ids = torch.full((len(tokens), max_chars), chars["<pad>"], dtype=torch.long)
    begin, end = chars["<eow>"], chars["<bow>"]
    for row, token in enumerate(tokens):
        spelled = [chars[token]] if token in ("<bos>", "<eos>") else [chars.get(c, chars["<oov>"]) for c in token]
        char_ids[row, : len(spelled) + 2] = torch.tensor([begin, *spelled, end])
    word_ids = None if words is None else torch.tensor([words.get(token, words["<oov>"]) for token in tokens])
    return char_ids, word_ids


def efml_token_embedding(
    state: dict[str, torch.Tensor],
    architecture: EfmlArchitecture,
    char_ids: torch.Tensor,
    word_ids: torch.Tensor | None,
) -> torch.Tensor:
    """EFML's `ConvTokenEmbedder`: (tokens, max_chars) [+ (tokens,)] -> (tokens, projection_dim)."""
    embedded = state["char_emb_layer.embedding.weight"][char_ids].transpose(1, 2)  # (tokens, char_dim, chars)
    activation = torch.relu if architecture.activation == "relu" else torch.tanh
    pooled = [
        activation(
            functional.conv1d(embedded, state[f"convolutions.{i}.weight"], state[f"convolutions.{i}.bias"])
            .max(-1)
            .values
        )
        for i in range(len(architecture.filters))
    ]
    hidden, size = torch.cat(pooled, dim=-1), architecture.num_filters
    for i in range(architecture.n_highway):
        projected = functional.linear(
            hidden, state[f"highways._layers.{i}.weight"], state[f"highways._layers.{i}.bias"]
        )
        gate = torch.sigmoid(projected[:, size:])
        hidden = gate * hidden + (1 - gate) * torch.relu(projected[:, :size])
    if word_ids is not None:
        hidden = torch.cat([state["word_emb_layer.embedding.weight"][word_ids], hidden], dim=-1)
    return functional.linear(hidden, state["projection.weight"], state["projection.bias"])


def _efml_lstm(state: dict[str, torch.Tensor], prefix: str, inputs: torch.Tensor, architecture: EfmlArchitecture):
    """AllenNLP's `LstmCellWithProjection` as EFML runs it (gates i, f, g, o; no forget bias; clips when non-zero)
    over `inputs` (steps, P) in their order, from zero states -> (steps, P)."""
    cell_size = architecture.dim
    memory = inputs.new_zeros(cell_size)
    hidden = inputs.new_zeros(architecture.projection_dim)
    outputs = []
    for step_input in inputs:
        gates = functional.linear(step_input, state[f"{prefix}.input_linearity.weight"]) + functional.linear(
            hidden, state[f"{prefix}.state_linearity.weight"], state[f"{prefix}.state_linearity.bias"]
        )
        i, f, g, o = gates.split(cell_size)
        memory = torch.sigmoid(i) * torch.tanh(g) + torch.sigmoid(f) * memory
        if architecture.cell_clip:
            memory = memory.clamp(-architecture.cell_clip, architecture.cell_clip)
        hidden = functional.linear(torch.sigmoid(o) * torch.tanh(memory), state[f"{prefix}.state_projection.weight"])
        if architecture.proj_clip:
            hidden = hidden.clamp(-architecture.proj_clip, architecture.proj_clip)
        outputs.append(hidden)
    return torch.stack(outputs)


@torch.no_grad()
def efml_sentence_layers(
    efml_state: dict[str, dict[str, torch.Tensor]],
    architecture: EfmlArchitecture,
    char_lexicon: list[str],
    word_lexicon: list[str] | None,
    sentence: list[str],
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """All layers of `sents2elmo(output_layer=-2)` for one sentence, fresh states: (n_layers + 1, len, 2P), `<bos>` and
    `<eos>` dropped; layer 0 is `[x; x]`, then `[forward; backward]` with skip connections after the first layer.
    Computed in `dtype` (EFML runs in float32)."""
    chars = {token: index for index, token in enumerate(char_lexicon)}
    words = None if word_lexicon is None else {token: index for index, token in enumerate(word_lexicon)}
    char_ids, word_ids = efml_batch_ids(sentence, chars, words, architecture.max_characters_per_token)
    embedder, encoder = efml_state[TOKEN_EMBEDDER_FILE], efml_state[ENCODER_FILE]
    embedder = {key: value.to(dtype) for key, value in embedder.items()}
    encoder = {key: value.to(dtype) for key, value in encoder.items()}
    tokens = efml_token_embedding(embedder, architecture, char_ids, word_ids)
    layers = [torch.cat([tokens, tokens], dim=-1)]
    forward_input, backward_input = tokens, tokens
    for layer in range(architecture.n_layers):
        forward = _efml_lstm(encoder, f"forward_layer_{layer}", forward_input, architecture)
        backward = _efml_lstm(encoder, f"backward_layer_{layer}", backward_input.flip(0), architecture).flip(0)
        if layer > 0:
            forward, backward = forward + forward_input, backward + backward_input
        layers.append(torch.cat([forward, backward], dim=-1))
        forward_input, backward_input = forward, backward
    return torch.stack(layers)[:, 1:-1]
