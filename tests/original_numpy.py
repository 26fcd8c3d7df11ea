"""An independent float64 NumPy transcription of the original bilm-tf forward pass, reading the options JSON and
HDF5 weights directly (TensorFlow layouts, forget bias added at run time). Used as an oracle for architectures the
shared fixture does not cover. One sentence at a time, zero initial states."""

import json

import h5py
import numpy as np

BOW, EOW, PAD, BOS, EOS = 258, 259, 260, 256, 257  # unshifted original character ids


def _char_ids(word: str | int, max_chars: int) -> list[int]:
    inner = [word] if isinstance(word, int) else list(word.encode("utf-8"))[: max_chars - 2]
    ids = [BOW, *inner, EOW]
    return ids + [PAD] * (max_chars - len(ids))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _token_embeddings(weights: h5py.File, options: dict, words: list) -> np.ndarray:
    cnn = options["char_cnn"]
    max_chars = cnn["max_characters_per_token"]
    table = weights["char_embed"][...].astype(np.float64)  # row = unshifted character id
    chars = table[np.array([_char_ids(w, max_chars) for w in words])]  # (n, max_chars, char_dim)
    pooled = []
    for index, (width, _) in enumerate(cnn["filters"]):
        kernel = weights[f"CNN/W_cnn_{index}"][0].astype(np.float64)  # (width, char_dim, n)
        windows = np.stack([chars[:, i : i + width] for i in range(max_chars - width + 1)], axis=1)
        conv = np.einsum("npwc,wcf->npf", windows, kernel) + weights[f"CNN/b_cnn_{index}"][...]
        pooled.append(conv.max(axis=1))
    hidden = np.concatenate(pooled, axis=-1)
    hidden = np.maximum(hidden, 0) if cnn["activation"] == "relu" else np.tanh(hidden)
    for index in range(cnn.get("n_highway", 0)):
        group = weights[f"CNN_high_{index}"]
        gate = _sigmoid(hidden @ group["W_carry"][...] + group["b_carry"][...])
        transformed = np.maximum(hidden @ group["W_transform"][...] + group["b_transform"][...], 0)
        hidden = gate * transformed + (1 - gate) * hidden
    if "CNN_proj" in weights:
        hidden = hidden @ weights["CNN_proj/W_proj"][...] + weights["CNN_proj/b_proj"][...]
    return hidden


def _run_direction(weights: h5py.File, lstm: dict, inputs: np.ndarray, direction: int) -> list[np.ndarray]:
    outputs, layer_input = [], inputs
    for layer in range(lstm["n_layers"]):
        cell = weights[f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"]
        kernel, bias, projection = cell["W_0"][...], cell["B"][...], cell["W_P_0"][...]
        h = np.zeros(lstm["projection_dim"])
        c = np.zeros(lstm["dim"])
        layer_output = []
        for x in layer_input:
            i, j, f, o = np.split(np.concatenate([x, h]) @ kernel + bias, 4)
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(j)
            if lstm.get("cell_clip"):
                c = np.clip(c, -lstm["cell_clip"], lstm["cell_clip"])
            h = (_sigmoid(o) * np.tanh(c)) @ projection
            if lstm.get("proj_clip"):
                h = np.clip(h, -lstm["proj_clip"], lstm["proj_clip"])
            layer_output.append(h)
        layer_output = np.stack(layer_output)
        if lstm.get("use_skip_connections") and layer > 0:
            layer_output = layer_output + layer_input
        outputs.append(layer_output)
        layer_input = layer_output
    return outputs


def original_layers(options_path, weights_path, words: list[str]) -> np.ndarray:
    """All layers for one sentence: (n_layers + 1, len(words), 2 * projection_dim), boundaries removed."""
    with open(options_path) as handle:
        options = json.load(handle)
    with h5py.File(weights_path, "r") as weights:
        tokens = _token_embeddings(weights, options, [BOS, *words, EOS])
        forward = _run_direction(weights, options["lstm"], tokens, 0)
        backward = [out[::-1] for out in _run_direction(weights, options["lstm"], tokens[::-1], 1)]
    layers = [np.concatenate([tokens, tokens], axis=-1)]
    layers += [np.concatenate([f, b], axis=-1) for f, b in zip(forward, backward, strict=True)]
    return np.stack(layers)[:, 1:-1]
