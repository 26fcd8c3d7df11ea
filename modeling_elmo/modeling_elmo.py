"""
PyTorch ELMo (Peters et al., 2018, "Deep contextualized word representations"): the character CNN, the bidirectional
LSTM language model with projection (biLM) and the scalar mixes of its layers (`ElmoModel`), with heads for token and
sequence classification and for (continued) pretraining. Each block names its counterpart in bilm-tf (variable
scopes) and AllenNLP (classes). The blocks hand their products and recurrences, as tensors, to the implementations
registered in `elmo_implementations`; the reference math is `reference_implementations` (docs/design-notes.md,
"Implementations").
"""

import contextlib
import inspect
import os
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import SequenceClassifierOutput, TokenClassifierOutput
from transformers.utils import ModelOutput
from transformers.utils.generic import can_return_tuple

from .character_ids import BOS_TOKEN, EOS_TOKEN, PADDING_CHAR, word_to_char_ids
from .configuration_elmo import ElmoConfig
from .convolution_precision import fp32_convolutions  # noqa: F401  (4.x remote code)
from .crf import LinearChainCrf, bio_constraints
from .elmo_call import is_exporting
from .elmo_implementations import ALL_ELMO_IMPLEMENTATIONS, CharCnnProducts, ElmoDispatch
from .lstm_cell import LayerKey, LstmWeights
from .lstm_states import ElmoLstmStates, LstmState, check_states
from .packed_sentences import pack_sentences
from .padded_recurrence import padded_bilm_layers
from .reference_implementations import ELMO_EAGER
from .sampled_softmax import LogUniformSampler, sampled_softmax_loss
from .transformers_compat import PreTrainedModel, init

# Transformers 4.x copies from a local folder only the modules that the loaded file itself imports (5.x: all it needs):
# the lines marked "4.x remote code" import modules that `word_embedding_store` and `reference_implementations` need,
# so that a saved folder loads under 4.x (tests/hub/test_hub.py checks that each file Transformers loads names them).
from .weight_snapshot import WeightSnapshot  # noqa: F401  (4.x remote code)
from .word_embedding_store import WordEmbeddingCache, WordEmbeddingStore, stored_or_computed, word_keys

# The arguments that the forwards share, described once; `document_args` writes them into each forward's `Args`.
ELMO_ARGS_DOCSTRING = r"""
    input_ids (`torch.LongTensor` of shape `(batch_size, num_words, config.input_ids_width)`):
        Character ids of every word from [`ElmoTokenizer`] (then its word id, for a model with a word embedding); a
        padded word is a row of zeros.
    attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`, *optional*):
        1 for words, 0 for padding. Derived from `input_ids` when absent.
    output_hidden_states (`bool`, *optional*, defaults to `config.output_hidden_states`):
        Return all `num_hidden_layers + 1` biLM layers as `hidden_states`.
    states (`ElmoLstmStates`, *optional*):
        The biLM's LSTM states to start each batch row from, updated in place with the rows' final states (see
        [`ElmoLstmStates`]). Default: the biLM's own with `config.stateful=True`, else zero states.
    return_dict (`bool`, *optional*, defaults to `config.return_dict`):
        Return the output class, or with `False` a tuple of its fields that are not `None`.
"""


def _arg_entries(text: str) -> dict[str, str]:
    """The entries of an `Args` section (a line `name (type):`, then the description indented), by name."""
    entries = {}
    for line in textwrap.dedent(text).splitlines():
        if line and not line[0].isspace():
            name = line.split(" ", 1)[0]
            entries[name] = line
        elif line:
            entries[name] += "\n" + line
    return entries


def document_args(method: Callable) -> Callable:
    """Write the `Args` section of the docstring of `method` (a `forward`): every parameter in order (`**kwargs` as
    `return_dict`), described by the `Args` the docstring has or else by `ELMO_ARGS_DOCSTRING`, as Transformers'
    `auto_docstring` does."""
    docstring = inspect.cleandoc(method.__doc__ or "")
    body, returns_heading, returns = docstring.partition("\nReturns:")
    intro, _, own_args = body.partition("Args:\n")
    own_entries = _arg_entries(own_args)
    entries = {**_arg_entries(ELMO_ARGS_DOCSTRING), **own_entries}
    names = [
        "return_dict" if parameter.kind is parameter.VAR_KEYWORD else name
        for name, parameter in inspect.signature(method).parameters.items()
        if name != "self"
    ]
    if wrong := [name for name in names if name not in entries] + [name for name in own_entries if name not in names]:
        raise TypeError(f"{method.__qualname__}: undocumented or unknown arguments {', '.join(wrong)}")
    args = "\n".join(textwrap.indent(entries[name], "    ") for name in names)
    method.__doc__ = f"{intro.rstrip()}\n\nArgs:\n{args}\n{returns_heading}{returns}".lstrip()
    return method


@dataclass
class ElmoModelOutput(ModelOutput):
    r"""
    Outputs of [`ElmoModel`].

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, num_words, 2 * projection_dim)`):
            Top biLM layer, `[forward; backward]`, zero at padded positions.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*, returned when `output_hidden_states=True`):
            `num_hidden_layers + 1` tensors of shape `(batch_size, num_words, 2 * projection_dim)`: the character-CNN
            token embedding duplicated (`[x; x]`), then `[forward; backward]` of every LSTM layer; each one on the
            autograd graph (`retain_grad()` gets its gradient).
        elmo_representations (`tuple(torch.FloatTensor)`, *optional*, returned when `num_output_representations > 0`):
            `num_output_representations` learned scalar mixes of all layers, each `(batch_size, num_words,
            2 * projection_dim)`.
        states (`ElmoLstmStates`, *optional*, returned when the call carried LSTM states):
            The `states` passed in (or the model's own with `config.stateful=True`), now holding every row's final
            LSTM states: pass them to the next call to continue from there.
    """

    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    elmo_representations: tuple[torch.FloatTensor, ...] | None = None
    states: ElmoLstmStates | None = None


@dataclass
class ElmoForPreTrainingOutput(ModelOutput):
    r"""
    Outputs of [`ElmoForPreTraining`] on stream windows.

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when labels are given):
            `0.5 * (forward_loss + backward_loss)`, bilm-tf's training loss.
        forward_loss, backward_loss (`torch.FloatTensor` of shape `()`, *optional*):
            Mean cross-entropy of each direction's next-token predictions: sampled softmax in training mode (when
            `config.lm_num_negative_samples` is set and smaller than the vocabulary), full softmax otherwise.
        forward_hidden_state, backward_hidden_state (`torch.FloatTensor` of shape `(batch_size, unroll_steps,
        projection_dim)`):
            Top biLM layer of each direction at every position of its window (before the output dropout).
        hidden_states (`tuple(torch.FloatTensor)`, *optional*, returned when `output_hidden_states=True`):
            `num_hidden_layers + 1` tensors of shape `(batch_size, unroll_steps, 2 * projection_dim)`: the token
            embeddings, then every LSTM layer, each `[forward; backward]` at position `t` of the two windows (the
            backward window runs the other way through the stream, so the halves belong to different tokens).
    """

    loss: torch.FloatTensor | None = None
    forward_loss: torch.FloatTensor | None = None
    backward_loss: torch.FloatTensor | None = None
    forward_hidden_state: torch.FloatTensor | None = None
    backward_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None


class ElmoHighwayGate(nn.Linear):
    """The transform gate's linear map of a highway layer, bilm-tf's `CNN_high_{i}/W_carry`, `b_carry` (its bias
    starts at -2: a new layer starts close to the identity)."""


class ElmoHighway(nn.Module):
    """
    One highway layer of the character CNN, bilm-tf's `CNN_high_{i}`: `g * relu(x W_t + b_t) + (1 - g) * x` with the
    transform gate `g = sigmoid(x W_g + b_g)`, bilm-tf's `W_carry`, `b_carry` (`W_t`, `b_t`: `W_transform`,
    `b_transform`).
    """

    def __init__(self, size: int):
        super().__init__()
        self.transform_gate = ElmoHighwayGate(size, size)
        self.transform = nn.Linear(size, size)

    def forward(self, hidden: torch.Tensor, products: CharCnnProducts) -> torch.Tensor:
        """`hidden`: (num_words, size) -> (num_words, size), the linear maps computed by `products.linear`."""
        gate = torch.sigmoid(products.linear(hidden, self.transform_gate.weight, self.transform_gate.bias))
        transformed = products.linear(hidden, self.transform.weight, self.transform.bias)
        return gate * torch.relu(transformed) + (1 - gate) * hidden


class ElmoCharacterProjection(nn.Linear):
    """
    The character CNN's projection to `projection_dim`, bilm-tf's `CNN_proj/W_proj`, `b_proj`. bilm-tf has none when
    the filters already give `projection_dim` features (`is_identity`): it then starts (and in `ElmoForPreTraining`
    stays) the identity, so that the weights can be written back in bilm-tf's format.
    """

    @property
    def is_identity(self) -> bool:
        return self.in_features == self.out_features


def boundary_char_rows(config: ElmoConfig) -> list[list[int]]:
    """Input ids of the sentence boundary tokens `<S>` and `</S>` the model inserts: 2 rows of `input_ids_width`."""
    size = config.max_characters_per_token
    if config.char_input == "bytes":
        rows = [word_to_char_ids(BOS_TOKEN, size), word_to_char_ids(EOS_TOKEN, size)]
    else:
        rows = [
            ids + [config.char_padding_id] * (size - len(ids)) for ids in (config.bos_char_ids, config.eos_char_ids)
        ]
    if config.has_word_embeddings:
        rows = [rows[0] + [config.bos_word_id], rows[1] + [config.eos_word_id]]
    return rows


class ElmoHeldChoice:
    """The model's choice of implementation as a block reads it: held once, in the config the model's blocks share
    (`config._elmo_implementation`, set by `ElmoPreTrainedModel.set_implementation`)."""

    config: ElmoConfig

    @property
    def implementation(self) -> str | None:
        return self.config._elmo_implementation

    @implementation.setter
    def implementation(self, name: str | None) -> None:
        self.config._elmo_implementation = name


def elmo_dispatch(config: ElmoConfig) -> ElmoDispatch:
    """The implementations of one forward call of a model with `config`, resolved on first use (`ElmoDispatch`)."""
    return ElmoDispatch(config._elmo_implementation, ELMO_EAGER)  # a global: Dynamo traces it with its source


class ElmoCharacterEncoder(ElmoHeldChoice, nn.Module):
    """
    Context-independent word embeddings from characters (AllenNLP's `_ElmoCharacterEncoder`): the character embedding
    (bilm-tf's `char_embed`), one convolution per filter width max-pooled over the word's characters
    (`CNN/W_cnn_{i}`, `b_cnn_{i}`) and the activation, the highway layers (`CNN_high_{i}`), then the projection to
    `projection_dim` (`CNN_proj`). ELMoForManyLangs models add a word embedding, whose vector comes before the
    character features in the projection. `embed_words` runs it once per distinct word.
    """

    WORDS_PER_CHUNK = 256  # words per char-CNN call in `embed_words`: bounds the convolution buffers
    elmo_part = "char_cnn"  # the part of the model it is for implementations (`elmo_call.PARTS`)

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config  # holds the model's choice of implementation (`config._elmo_implementation`)
        self.char_embeddings = nn.Embedding(config.char_vocab_size, config.char_embedding_dim, padding_idx=0)
        self.word_embeddings = (
            nn.Embedding(config.word_vocab_size, config.word_embedding_dim, padding_idx=0)
            if config.has_word_embeddings
            else None
        )
        self.char_padding_id = PADDING_CHAR if config.char_input == "bytes" else config.char_padding_id
        self.convolutions = nn.ModuleList(
            nn.Conv1d(config.char_embedding_dim, num_filters, kernel_size=width)
            for width, num_filters in config.char_filters
        )
        self.activation = torch.relu if config.char_activation == "relu" else torch.tanh
        self.highways = nn.ModuleList(ElmoHighway(config.num_char_filters) for _ in range(config.num_highway_layers))
        self.projection = ElmoCharacterProjection(config.token_features, config.projection_dim)
        self.max_filter_width = max(width for width, _ in config.char_filters)
        self.boundary_rows = boundary_char_rows(config)
        self._boundary_ids: dict[torch.device, torch.Tensor] = {}  # `boundary_char_ids` by device
        self.token_embedding_table: WordEmbeddingStore | None = None
        self.word_cache: WordEmbeddingCache | None = None

    def forward(self, token_ids: torch.Tensor, dispatch: ElmoDispatch | None = None) -> torch.Tensor:
        """
        `token_ids`: (num_words, num_chars <= max_characters_per_token) character ids, followed with a word embedding
        by a column of word ids -> (num_words, projection_dim). `dispatch`: the implementations of the model's
        forward call (by default resolved for this call).
        """
        char_ids, word_ids = self.split_word_ids(token_ids)
        chars = self.char_embeddings(char_ids)  # (num_words, num_chars, char_embedding_dim)
        dispatch = dispatch or elmo_dispatch(self.config)
        products = dispatch.char_cnn_products(chars, self.projection.weight, self.parameters())
        pooled = [products.max_pooled_convolution(chars, conv.weight, conv.bias) for conv in self.convolutions]
        hidden = self.activation(torch.cat(pooled, dim=-1))  # (num_words, num_char_filters)
        for highway in self.highways:
            hidden = highway(hidden, products)
        if word_ids is not None:
            hidden = torch.cat([self.word_embeddings(word_ids), hidden], dim=-1)
        return products.linear(hidden, self.projection.weight, self.projection.bias)

    def split_word_ids(self, token_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`token_ids` (..., columns) -> the character ids (..., chars) and, with a word embedding, the word ids
        (...) of its last column (`None` without)."""
        if self.word_embeddings is None:
            return token_ids, None
        return token_ids[..., :-1], token_ids[..., -1]

    def embed_words(self, char_ids: torch.Tensor, dispatch: ElmoDispatch | None = None) -> torch.Tensor:
        """
        `forward` computed once per distinct word: `char_ids` (num_words, `config.input_ids_width`) -> (num_words,
        projection_dim). Without autograd and autocast, words found in `token_embedding_table` or `word_cache` skip
        the CNN and new ones are added to the cache. An implementation without `embeds_unique_words` (the
        "reference") runs `forward` on every word. `dispatch`: as in `forward`.
        """
        dispatch = dispatch or elmo_dispatch(self.config)
        if not dispatch.embeds_unique_words(char_ids.device):
            return self(char_ids, dispatch)
        unique, inverse = torch.unique(char_ids, dim=0, return_inverse=True)
        if torch.is_grad_enabled() or torch.is_autocast_enabled(char_ids.device.type):  # stores hold exact rows
            return self._embed_by_length(unique, dispatch)[inverse]
        cache = self.word_cache  # one read: `set_word_cache` may replace it meanwhile
        with cache.in_use(list(self.parameters())) if cache is not None else contextlib.nullcontext():
            embeddings = stored_or_computed(
                unique,
                lambda token_ids: self._embed_by_length(token_ids, dispatch),
                self.projection.bias,
                self.token_embedding_table,
                cache,
            )
        return embeddings[inverse]

    def _embed_by_length(self, token_ids: torch.Tensor, dispatch: ElmoDispatch) -> torch.Tensor:
        """
        `forward` on chunks of words of similar length, each cut after its longest word plus `max_filter_width`
        padding characters: a window of padding characters has the same value wherever it lies, so the max-pool is
        unchanged. `token_ids` (num_words, max_chars [+ word id]) -> (num_words, projection_dim).
        """
        char_ids, word_ids = self.split_word_ids(token_ids)
        is_char = char_ids != self.char_padding_id
        positions = torch.arange(1, char_ids.shape[1] + 1, device=char_ids.device)
        lengths = (is_char * positions).amax(dim=1)  # last non-padding character, 1-based
        order = lengths.argsort()
        word_chunks = order.split(self.WORDS_PER_CHUNK)
        longest = lengths[torch.stack([chunk[-1] for chunk in word_chunks])].tolist()  # one read for all chunks
        chunks = []
        for chunk, length in zip(word_chunks, longest, strict=True):
            width = min(char_ids.shape[1], length + self.max_filter_width)
            columns = [char_ids[chunk, :width]] + ([] if word_ids is None else [word_ids[chunk, None]])
            chunks.append(self(torch.cat(columns, dim=1), dispatch))
        return torch.cat(chunks)[order.argsort()]

    def boundary_char_ids(self, device: torch.device) -> torch.Tensor:
        """Input ids of the sentence boundary tokens `<S>` and `</S>` the model inserts: (2, `input_ids_width`), made
        once per device (a copy to an accelerator waits for it); made afresh while tracing (export, compile)."""
        if is_exporting() or torch.compiler.is_compiling():
            return torch.tensor(self.boundary_rows, device=device)
        device = torch.device(device)
        ids = self._boundary_ids.get(device)
        if ids is None:
            with torch.inference_mode(False):  # a plain tensor, usable in every later call
                ids = self._boundary_ids[device] = torch.tensor(self.boundary_rows, device=device)
        return ids


class ElmoLstmLayer(ElmoHeldChoice, GradientCheckpointingLayer):
    r"""
    One biLM layer: a forward and a backward LSTM cell with projection (TensorFlow `LSTMCell(num_proj=...)`, AllenNLP's
    `LstmCellWithProjection`), stored stacked so that both directions can run in the same batched matrix products.
    Index 0 of every parameter is the forward direction, index 1 the backward one: bilm-tf's
    `RNN_{0,1}/RNN/MultiRNNCell/Cell{layer}/LSTMCell`, whose `W_0` (input_size + proj_size, 4 * cell_size) is
    `[weight_ih; weight_hh]`, `B` is `bias` and `W_P_0` is `weight_proj`. Gate order is TensorFlow's `(i, j, f, o)`,
    and `config.lstm_forget_bias` is added to the forget gate at run time as TensorFlow's `LSTMCell` does.

    The layer works on *packed* sequences (time-major, rows sorted by decreasing length, as in
    `torch.nn.utils.rnn.PackedSequence`): step `t` owns rows `offsets[t] : offsets[t] + batch_sizes[t]`, so padding
    is never computed. Implementations compute it from its tensors and settings (`weights`), each step by
    `lstm_cell.lstm_cell`.
    """

    elmo_part = "lstm"  # the part of the model it is for implementations (`elmo_call.PARTS`)
    quantization: str | None = None  # a quantized layer's method (`modeling_elmo.quantization`)

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config  # holds the model's choice of implementation (`config._elmo_implementation`)
        input_size, cell_size, proj_size = config.projection_dim, config.lstm_cell_size, config.projection_dim
        self.weight_ih = nn.Parameter(torch.empty(2, input_size, 4 * cell_size))
        self.weight_hh = nn.Parameter(torch.empty(2, proj_size, 4 * cell_size))
        self.bias = nn.Parameter(torch.empty(2, 4 * cell_size))
        self.weight_proj = nn.Parameter(torch.empty(2, cell_size, proj_size))
        self.cell_clip = config.cell_clip
        self.proj_clip = config.proj_clip
        self.forget_bias = config.lstm_forget_bias
        self.implementation_key = LayerKey()  # what implementations keep for this layer is keyed by it

    def weights(self) -> LstmWeights:
        """The layer as implementations see it: its tensors and settings."""
        return LstmWeights(
            self.weight_ih,
            self.weight_hh,
            self.bias,
            self.weight_proj,
            self.forget_bias,
            self.cell_clip,
            self.proj_clip,
            self.training,
            self.implementation_key,
        )

    def forward(
        self,
        inputs: torch.Tensor,
        batch_sizes: list[int],
        initial_state: LstmState,
        dispatch: ElmoDispatch | None = None,
    ) -> tuple[torch.Tensor, LstmState]:
        """
        Args:
            inputs: (2, num_packed, input_size) packed inputs of both directions (backward already reversed).
            batch_sizes: active rows per time step (non-increasing).
            initial_state: hidden (2, batch, proj_size) and cell (2, batch, cell_size), sorted rows.
            dispatch: the implementations of the model's forward call (by default resolved for this call).

        Returns:
            outputs (2, num_packed, proj_size) and the final state (sorted rows), each row's state after its last
            step.
        """
        dispatch = dispatch or elmo_dispatch(self.config)
        return dispatch.lstm_layer(self.weights(), inputs, batch_sizes, initial_state)


class ElmoBiLm(nn.Module):
    """
    The biLM: the stack of `ElmoLstmLayer`s over packed sequences (bilm-tf's `MultiRNNCell` of each direction,
    AllenNLP's `ElmoLstm`), where every layer after the first adds its input to its output when
    `config.use_skip_connections` (bilm-tf's `ResidualWrapper`), and, in training mode, `dropout` is applied to every
    layer's input, which the skip connection then adds (bilm-tf's `DropoutWrapper(ResidualWrapper(cell),
    input_keep_prob)`, the language model's recipe).
    """

    def __init__(self, config: ElmoConfig, dropout: float = 0.0):
        super().__init__()
        self.layers = nn.ModuleList(ElmoLstmLayer(config) for _ in range(config.num_hidden_layers))
        self.use_skip_connections = config.use_skip_connections
        self.dropout = dropout

    def forward(
        self,
        inputs: torch.Tensor,
        batch_sizes: list[int],
        initial_states: list[LstmState],
        layer_inputs: Callable[[torch.Tensor], torch.Tensor] | None = None,
        dispatch: ElmoDispatch | None = None,
    ) -> tuple[torch.Tensor, list[LstmState]]:
        """
        Args:
            inputs: (2, num_packed, projection_dim) packed token embeddings of both directions, the backward
                direction's rows in its own order.
            batch_sizes: active rows per time step (non-increasing).
            initial_states: per layer, hidden (2, batch, projection_dim) and cell (2, batch, lstm_cell_size), in the
                packed row order.
            layer_inputs: called with each layer's inputs (the token embeddings, then every layer's outputs but the
                top one's) before the layer reads them, and returns what it reads (the same values): lets a caller
                keep every layer and put it on the autograd path.
            dispatch: the implementations of the model's forward call (by default resolved for this call).

        Returns:
            The top layer's packed outputs (2, num_packed, projection_dim) and per layer the final state (packed row
            order).
        """
        final_states = []
        dispatch = dispatch or elmo_dispatch(self.layers[0].config)
        for index, layer in enumerate(self.layers):
            if layer_inputs is not None:
                inputs = layer_inputs(inputs)
            if self.dropout and self.training:
                inputs = nn.functional.dropout(inputs, self.dropout)
            outputs, final_state = layer(inputs, batch_sizes, initial_states[index], dispatch)
            if self.use_skip_connections and index > 0:
                outputs = outputs + inputs
            final_states.append(final_state)
            inputs = outputs
        return inputs, final_states


class ElmoScalarMix(nn.Module):
    """
    The task-specific combination of the biLM's layers (AllenNLP's `ScalarMix`, bilm-tf's `weight_layers` with its
    `ELMo_W` and `ELMo_gamma`): `gamma * sum_k softmax(s)_k * h_k` over all `num_hidden_layers + 1` layers `h_k`. With
    `config.scalar_mix_layer_norm`, each `h_k` is first normalised with the mean and variance of its unpadded
    elements (words x features) per sentence or over the batch (`config.scalar_mix_layer_norm_scope`), `epsilon`
    added to the variance (AllenNLP's `ScalarMix` uses 1e-13).
    """

    NORM_DIMS = {"sentence": (1, 2), "batch": (0, 1, 2)}  # per scope, the dimensions of (batch, words, dim) reduced

    def __init__(self, config: ElmoConfig, epsilon: float = 1e-12):
        super().__init__()
        self.scalar_parameters = nn.Parameter(torch.zeros(config.num_hidden_layers + 1))
        self.gamma = nn.Parameter(torch.ones(1))
        self.norm_dims = self.NORM_DIMS[config.scalar_mix_layer_norm_scope] if config.scalar_mix_layer_norm else None
        self.layer_norm = config.scalar_mix_layer_norm
        self.epsilon = epsilon

    def layer_weights(self) -> torch.Tensor:
        """The softmax-normalised weight of each layer: (num_layers,)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def _masked_layer_norm(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Normalise `hidden` (batch, words, dim) with the mean and variance of its unpadded elements (`norm_dims`; all
        dimensions when `None`)."""
        mask = mask.unsqueeze(-1).to(hidden.dtype)
        count = (mask.sum(dim=self.norm_dims, keepdim=True) * hidden.shape[-1]).clamp(min=1)
        mean = (hidden * mask).sum(dim=self.norm_dims, keepdim=True) / count
        variance = (((hidden - mean) * mask) ** 2).sum(dim=self.norm_dims, keepdim=True) / count
        return (hidden - mean) / torch.sqrt(variance + self.epsilon)

    def mix(self, layers: Sequence[torch.Tensor], mask: torch.Tensor | None) -> torch.Tensor:
        """`layers`: num_layers tensors (batch, words, dim); `mask` (batch, words), needed only with layer norm -> the
        mix (batch, words, dim), padded positions not zeroed."""
        weights = self.layer_weights()
        if self.layer_norm:
            layers = tuple(self._masked_layer_norm(layer, mask) for layer in layers)
        return self.gamma * sum(weight * layer for weight, layer in zip(weights, layers, strict=True))

    def forward(self, layers: tuple[torch.Tensor, ...], mask: torch.Tensor) -> torch.Tensor:
        """`layers`: num_layers tensors (batch, words, dim); `mask` (batch, words) -> (batch, words, dim), zero at
        padded words."""
        mixed = self.mix(layers, mask)
        return mixed * mask.unsqueeze(-1).to(mixed.dtype)


def _check_indices(name: str, values: torch.Tensor, size: int, ignore_index: int | None = None) -> None:
    """Refuse `values` that are not integer indices in `[0, size)` (or `ignore_index`), naming `name` and one."""
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(values).__name__}.")
    if values.device.type == "meta":
        raise ValueError(f"{name} is on the meta device, which holds no values: move it to a real device first.")
    if values.dtype.is_floating_point or values.dtype.is_complex or values.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer ids (e.g. torch.long), got dtype {values.dtype}.")
    if values.numel() == 0:
        return
    low, high = torch.aminmax(values)  # one pass; the offending value is looked for only on failure
    if low >= 0 and high < size:
        return
    invalid = (values < 0) | (values >= size)
    if ignore_index is not None:
        invalid &= values != ignore_index
    if invalid.any():
        allowed = f"[0, {size - 1}]" + (f" or {ignore_index}" if ignore_index is not None else "")
        raise ValueError(f"{name} must be in {allowed}, found {int(values[invalid][0])}.")


# The `quant_method` under which elmo-transformers registers its quantization with Transformers
# (`modeling_elmo.quantization.QUANT_METHOD`), and the `from_pretrained` arguments that say where config.json is.
ELMO_QUANT_METHOD = "elmo"
_CONFIG_FILE_ARGUMENTS = (
    "cache_dir",
    "force_download",
    "local_files_only",
    "proxies",
    "token",
    "revision",
    "subfolder",
    "_from_auto",
    "_from_pipeline",
    "_commit_hash",
)


def _elmo_quantization_registered() -> bool:
    """Whether Transformers knows elmo-transformers' quantizer (registered by `import modeling_elmo`)."""
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    return ELMO_QUANT_METHOD in AUTO_QUANTIZER_MAPPING


def _quantization_dict(quantization_config) -> dict:
    """A `quantization_config` (a config object or its dict) as a dict."""
    to_dict = getattr(quantization_config, "to_dict", None)
    return to_dict() if callable(to_dict) else dict(quantization_config)


def _saved_quantization_config(config_class: type, args: tuple, kwargs: dict) -> dict | None:
    """The `quantization_config` of the model that `from_pretrained(*args, **kwargs)` loads, as a dict, or None: from
    its `config` argument, else from its config.json (read as `from_pretrained` reads it, so a folder that cannot be
    read fails as it would there)."""
    config = kwargs.get("config")
    if config is None or isinstance(config, str | os.PathLike):
        source = config if config is not None else args[0] if args else kwargs.get("pretrained_model_name_or_path")
        if source is None:
            return None
        arguments = {name: kwargs[name] for name in _CONFIG_FILE_ARGUMENTS if name in kwargs}
        held = config_class.get_config_dict(source, **arguments)[0].get("quantization_config")
    else:
        held = getattr(config, "quantization_config", None)
    return None if held is None else _quantization_dict(held)


def _quantized_without_the_package(source, held: dict) -> str:
    folder = "This model" if source is None else f"{source}"
    return (
        f"{folder} is saved quantized by elmo-transformers (quantization method {held.get('method')!r}): its biLM "
        "weights load only with that package's quantized layers. Install it (not yet on PyPI: pip install "
        '"elmo-transformers @ git+https://github.com/elmo-transformers/elmo-transformers") and '
        "`import modeling_elmo` before loading. It cannot be loaded unquantized (it holds no float32 weights): for "
        "an unquantized model, load the float32 folder it was quantized from."
    )


def _other_quantization(held: dict, asked) -> str:
    return (
        f"This folder is saved quantized ({held}); quantization_config={_quantization_dict(asked)} cannot change "
        "that: load the float32 folder to quantize it another way."
    )


class ElmoPreTrainedModel(PreTrainedModel):
    config: ElmoConfig
    config_class = ElmoConfig
    base_model_prefix = "elmo"
    main_input_name = "input_ids"
    _no_split_modules = ["ElmoLstmLayer"]
    supports_gradient_checkpointing = True  # per biLM layer (`ElmoLstmLayer`)
    # checkpoints saved before the highway gate was renamed (`carry`, bilm-tf's name) load under the new name
    _RENAMED_KEYS = {r"^(.*\.highways\.\d+)\.carry\.": r"\1.transform_gate."}

    @classmethod
    def from_pretrained(cls, *args, elmo_implementation: str | None = None, **kwargs):
        """As in [`PreTrainedModel`]; checkpoints with the highway gate's old name (`carry`) load too.
        `elmo_implementation`: the implementation to choose (`set_implementation`), as `attn_implementation`. Refused
        before loading: an unknown or unavailable `elmo_implementation`; a folder saved quantized by elmo-transformers
        where that package's quantization is not registered (this file run as remote code without the package: its
        weights would not fit the float32 layers); a `quantization_config` other than the one the saved quantized
        folder holds (Transformers would use the folder's and only warn). The folder's own `quantization_config`
        asked again loads as without it (without Transformers' warning)."""
        ALL_ELMO_IMPLEMENTATIONS.check_name(elmo_implementation)
        asked = kwargs.get("quantization_config")
        if asked is not None or not _elmo_quantization_registered():
            held = _saved_quantization_config(cls.config_class, args, kwargs)
            if held is not None and held.get("quant_method") == ELMO_QUANT_METHOD:
                if not _elmo_quantization_registered():
                    raise ImportError(_quantized_without_the_package(args[0] if args else None, held))
                if asked is not None and _quantization_dict(asked) != held:
                    raise ValueError(_other_quantization(held, asked))
                kwargs.pop("quantization_config", None)  # the folder's own, which Transformers uses anyway
        kwargs["key_mapping"] = {**cls._RENAMED_KEYS, **(kwargs.get("key_mapping") or {})}
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        asked, held = kwargs.get("quantization_config"), getattr(model.config, "quantization_config", None)
        if asked is not None and held is not None and _quantization_dict(asked) != _quantization_dict(held):
            raise ValueError(_other_quantization(_quantization_dict(held), asked))
        if elmo_implementation is not None:
            model.set_implementation(elmo_implementation)
        return loaded

    def save_pretrained(self, *args, save_original_format: bool = False, **kwargs):
        """As in [`PreTrainedModel`], but always with the current parameter names, whatever names were loaded."""
        return super().save_pretrained(*args, save_original_format=save_original_format, **kwargs)

    def set_implementation(self, name: str | None = None) -> None:
        """
        Choose the implementation of the character CNN's products and the biLM's recurrence for every call of this
        model, by a name of `ALL_ELMO_IMPLEMENTATIONS.names()`: "eager" (the reference), "reference" (the
        straightforward paths, for checks), those of `modeling_elmo.engine`; `None` (the default) tries the defaults
        registered for the device of each call. A call that the chosen one does not support runs the defaults' or the
        reference (docs/model.md). An unknown name, or one that cannot run here, is refused in one line listing those
        that can. The choice is held in the config (`config._elmo_implementation`, not saved).
        """
        ALL_ELMO_IMPLEMENTATIONS.check_name(name)
        layers = [module for module in self.modules() if isinstance(module, ElmoLstmLayer) and not module.quantization]
        chosen = ALL_ELMO_IMPLEMENTATIONS.get_interface(name, ELMO_EAGER, self.device.type)[0]  # None: the default
        for layer in layers if name is not None and hasattr(chosen, "check") else ():
            chosen.check(layer.weights())  # an implementation may refuse a model it cannot run (before any change)
        for layer in layers if hasattr(chosen, "release") else ():  # one that keeps weights per layer replaces
            ALL_ELMO_IMPLEMENTATIONS.release(layer.implementation_key, keep=chosen)  # what the others kept
        for module in self.modules():
            if isinstance(module, ElmoHeldChoice):
                module.implementation = name
        self.config._elmo_implementation = name

    def resize_token_embeddings(
        self, new_num_tokens: int | None = None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """
        The character embedding, unchanged: its vocabulary (`config.char_vocab_size` rows) is fixed, and every word is
        spelled with these characters. A request to grow is a no-op; a smaller size or `pad_to_multiple_of` is
        refused (docs/design-notes.md, "A fixed character vocabulary").
        """
        embeddings = self.get_input_embeddings()
        if (
            new_num_tokens is not None and new_num_tokens < embeddings.num_embeddings
        ) or pad_to_multiple_of is not None:
            raise ValueError(
                f"ELMo's character vocabulary is fixed ({embeddings.num_embeddings} character ids): the character "
                f"embedding cannot be resized (asked for {new_num_tokens} rows, pad_to_multiple_of="
                f"{pad_to_multiple_of}). New words need no new ids: they are spelled with the same characters."
            )
        return embeddings

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        # close to bilm-tf's initialisers (docs/design-notes.md, "Initialisation")
        if isinstance(module, ElmoCharacterProjection) and module.is_identity:
            init.copy_(module.weight, torch.eye(module.in_features))
            init.zeros_(module.bias)
        elif isinstance(module, (nn.Linear, nn.Conv1d)):
            init.normal_(module.weight, std=module.weight[0].numel() ** -0.5)
            if isinstance(module, ElmoHighwayGate):
                init.constant_(module.bias, -2.0)
        elif isinstance(module, nn.Embedding) and not getattr(module.weight, "_is_hf_initialized", False):
            init.uniform_(module.weight, -1.0, 1.0)
            if module.padding_idx is not None:
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, ElmoLstmLayer) and not module.quantization:  # quantized weights are only loaded
            for weight in (module.weight_ih, module.weight_hh, module.weight_proj):
                bound = weight.shape[1] ** -0.5
                init.uniform_(weight, -bound, bound)
            init.zeros_(module.bias)  # as bilm-tf; the forget gate's 1.0 is `config.lstm_forget_bias`
        elif isinstance(module, ElmoLmSoftmax):
            init.normal_(module.weight, std=module.weight.shape[1] ** -0.5)  # bilm-tf's softmax initialiser
            init.zeros_(module.bias)
        elif isinstance(module, ElmoScalarMix):
            init.zeros_(module.scalar_parameters)
            init.ones_(module.gamma)
        elif isinstance(module, LinearChainCrf):
            for parameter in (module.transitions, module.start_transitions, module.end_transitions):
                init.zeros_(parameter)


class ElmoModel(ElmoPreTrainedModel):
    r"""
    The ELMo biLM: character ids `(batch_size, num_words, config.input_ids_width)` from [`ElmoTokenizer`] to every
    layer's contextual word vectors, without the sentence boundary tokens that it adds inside. Stateless by default
    (every call starts from zero LSTM states) unless given `states=` or built with `config.stateful=True`.

    `add_scalar_mixes=False` leaves out the `config.num_output_representations` scalar mixes; `lstm_dropout` is the
    dropout on every LSTM layer's input in training mode (the language model's, see [`ElmoForPreTraining`]).
    """

    _keys_to_ignore_on_load_unexpected = [r"^softmax\."]  # the LM softmax of a saved ElmoForPreTraining

    def __init__(self, config: ElmoConfig, add_scalar_mixes: bool = True, lstm_dropout: float = 0.0):
        super().__init__(config)
        self.char_encoder = ElmoCharacterEncoder(config)
        self.bilm = ElmoBiLm(config, dropout=lstm_dropout)
        num_mixes = config.num_output_representations if add_scalar_mixes else 0
        self.scalar_mixes = nn.ModuleList(ElmoScalarMix(config) for _ in range(num_mixes))
        self._lstm_states = ElmoLstmStates(config)  # carried between calls when `config.stateful`
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.char_encoder.char_embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.char_encoder.char_embeddings = value

    def reset_states(self) -> None:
        """Forget the LSTM states carried between calls in stateful mode."""
        self._lstm_states.reset()

    def set_word_cache(self, max_words: int | None = 100_000) -> None:
        """
        Opt-in for inference: keep the character-CNN embeddings of up to `max_words` recently seen distinct words
        between calls (LRU), emptied when the character encoder's weights change (docs/speed.md); `None` drops it.
        """
        self.char_encoder.word_cache = WordEmbeddingCache(capacity=max_words) if max_words is not None else None

    def set_token_embedding_table(self, words: list[str], embeddings: torch.Tensor | None) -> None:
        """
        Use precomputed context-independent token embeddings `embeddings` (len(words), projection_dim) for `words`
        at inference instead of running the character CNN on them (e.g. the `elmo_token_embeddings.hdf5` of an
        original model; see `token_embeddings.load_token_embedding_table`). `None` removes the table. The table must
        come from this model's weights: it is used as given.
        """
        if embeddings is None:
            self.char_encoder.token_embedding_table = None
            return
        if self.config.char_input != "bytes":
            raise ValueError("A token embedding table is keyed by byte ids: this model reads a character lexicon.")
        expected = (len(words), self.config.projection_dim)
        if tuple(embeddings.shape) != expected:
            raise ValueError(f"token embeddings must have shape {expected}, got {tuple(embeddings.shape)}.")
        if not torch.isfinite(embeddings).all():
            raise ValueError("embeddings hold NaN or infinite values.")
        size = self.config.max_characters_per_token
        table = WordEmbeddingStore()
        table.add(word_keys(torch.tensor([word_to_char_ids(word, size) for word in words])), embeddings)
        self.char_encoder.token_embedding_table = table

    def _check_input_ids(self, input_ids: torch.Tensor, name: str = "input_ids") -> None:
        """Refuse ids (`name`) out of range or whose shape is not (batch, words, `input_ids_width`)."""
        if self.config.has_word_embeddings and isinstance(input_ids, torch.Tensor) and input_ids.dim() == 3:
            char_ids, word_ids = self.char_encoder.split_word_ids(input_ids)
            _check_indices(name, char_ids, self.config.char_vocab_size)
            _check_indices(f"{name} (word ids, the last column)", word_ids, self.config.word_vocab_size)
        else:
            _check_indices(name, input_ids, self.config.char_vocab_size)
        if input_ids.dim() != 3 or input_ids.shape[-1] != self.config.input_ids_width:
            raise ValueError(
                f"{name} must have shape (batch_size, num_words, {self.config.input_ids_width}), got "
                f"{tuple(input_ids.shape)}."
            )

    def _forward_exportable(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None, output_hidden_states: bool | None
    ) -> ElmoModelOutput:
        """
        `forward` for `torch.export` (`padded_recurrence`): the same outputs with symbolic batch and word dimensions.
        Stateless only; shapes are checked, values are not (that would read them).
        """
        if self.config.stateful:
            raise ValueError(
                "A stateful ElmoModel (config.stateful=True) cannot be exported: its LSTM states carry over between "
                "calls. Set model.config.stateful = False to export the stateless model."
            )
        quantized = {layer.quantization for layer in self.bilm.layers} - {None}
        if quantized:
            raise ValueError(
                f"A quantized ElmoModel ({', '.join(sorted(quantized))}) cannot be exported: its layers run CPU "
                "kernels that torch.export does not trace. Export the float32 model."
            )
        if input_ids.dim() != 3 or input_ids.shape[-1] != self.config.input_ids_width:
            raise ValueError(
                f"input_ids must have shape (batch_size, num_words, {self.config.input_ids_width}), got "
                f"{tuple(input_ids.shape)}."
            )
        if attention_mask is None:
            attention_mask = (input_ids != 0).any(dim=-1)
        layers = padded_bilm_layers(
            self.char_encoder,
            self.bilm,
            self.char_encoder.boundary_char_ids(input_ids.device),
            input_ids,
            attention_mask,
        )
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        return ElmoModelOutput(
            last_hidden_state=layers[-1],
            hidden_states=layers if output_hidden_states else None,
            elmo_representations=tuple(mix(layers, attention_mask) for mix in self.scalar_mixes) or None,
        )

    @document_args
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        states: ElmoLstmStates | None = None,
        keep_sentence_boundaries: bool = False,
        backward_input_ids: torch.LongTensor | None = None,
        **kwargs,
    ) -> ElmoModelOutput:
        r"""
        Every layer of the biLM over the words of each row, `(batch_size, num_words, 2 * projection_dim)`.

        Args:
            keep_sentence_boundaries (`bool`, *optional*, defaults to `False`):
                Return the layers at every token of each row's `<S> words </S>`, from position 0 (AllenNLP's
                `_ElmoBiLm`): `(batch_size, num_words + 2, 2 * projection_dim)`, zero after each row's `</S>`; the
                scalar mixes then run over these tokens.
            backward_input_ids (`torch.LongTensor` of the shape of `input_ids`, *optional*):
                Read the inputs as bilm-tf's training windows, `(batch_size, unroll_steps, config.input_ids_width)`:
                `input_ids` the forward streams' tokens and these the backward streams' (each direction in its own
                order; no padding, no boundary tokens added). The layers are then `(batch_size, unroll_steps,
                2 * projection_dim)`, `[forward; backward]` at position `t` of the two windows.
        """
        if is_exporting():  # torch.export / ONNX: the padded path, with no Python values read from tensors
            if states is not None or backward_input_ids is not None or keep_sentence_boundaries:
                raise ValueError(
                    "Only stateless sentence inputs can be exported: no states=, backward_input_ids or "
                    "keep_sentence_boundaries."
                )
            return self._forward_exportable(input_ids, attention_mask, output_hidden_states)
        self._check_input_ids(input_ids)
        if states is None and self.config.stateful:
            states = self._lstm_states
        if states is not None:
            check_states(states, self.config)
        if backward_input_ids is None:
            attention_mask = self._checked_attention_mask(input_ids, attention_mask)
        else:
            attention_mask = self._checked_windows(input_ids, backward_input_ids, attention_mask)
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        all_layers = bool(output_hidden_states or self.scalar_mixes)
        dispatch = elmo_dispatch(self.config)  # the implementations, resolved once for this call
        if backward_input_ids is None:
            layers = self._sentence_layers(
                input_ids, attention_mask, all_layers, states, keep_sentence_boundaries, dispatch
            )
        else:
            layers = self._window_layers(input_ids, backward_input_ids, all_layers, states, dispatch)
        if keep_sentence_boundaries:  # each row's tokens from position 0: its words and the two boundaries
            positions = torch.arange(layers[-1].shape[1], device=attention_mask.device)
            attention_mask = positions < attention_mask.sum(dim=1, keepdim=True) + 2
        representations = tuple(mix(layers, attention_mask) for mix in self.scalar_mixes)
        return ElmoModelOutput(
            last_hidden_state=layers[-1],
            hidden_states=layers if output_hidden_states else None,
            elmo_representations=representations or None,
            states=states,
        )

    def _checked_attention_mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        """`attention_mask` of sentence inputs (derived from `input_ids` when `None`), refused unless it is a 0/1
        mask of shape (batch, words) for a batch of at least one row."""
        if input_ids.shape[0] == 0:
            raise ValueError("Empty batch: input_ids has batch size 0.")
        if attention_mask is None:
            return (input_ids != 0).any(dim=-1)
        if attention_mask.shape != input_ids.shape[:2]:
            raise ValueError(
                f"attention_mask must have shape {tuple(input_ids.shape[:2])}, got {tuple(attention_mask.shape)}."
            )
        if attention_mask.device.type == "meta" or ((attention_mask != 0) & (attention_mask != 1)).any():
            raise ValueError("attention_mask must hold 1 for words and 0 for padding (on a real device).")
        return attention_mask

    def _checked_windows(
        self, input_ids: torch.Tensor, backward_input_ids: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Refuse stream windows that are empty, of different shapes or padded; their all-ones word mask."""
        if isinstance(backward_input_ids, torch.Tensor) and backward_input_ids.shape != input_ids.shape:
            raise ValueError(
                f"backward_input_ids must have the shape of input_ids {tuple(input_ids.shape)}, got "
                f"{tuple(backward_input_ids.shape)}."
            )
        if 0 in input_ids.shape:
            raise ValueError(
                f"Windows need batch_size, unroll_steps >= 1: input_ids has shape {tuple(input_ids.shape)}."
            )
        if attention_mask is not None:
            raise ValueError("Stream windows have no padding: give no attention_mask with backward_input_ids.")
        self._check_input_ids(backward_input_ids, "backward_input_ids")
        return input_ids.new_ones(input_ids.shape[:2], dtype=torch.bool)

    def _run_bilm(
        self,
        inputs: torch.Tensor,
        batch_sizes: list[int],
        states: ElmoLstmStates | None,
        order: torch.Tensor | None,
        layer_inputs: Callable[[torch.Tensor], torch.Tensor],
        dispatch: ElmoDispatch,
    ) -> torch.Tensor:
        """The biLM on packed `inputs` (2, num_packed, projection_dim) from `states` (zero if `None`, updated with
        the final states otherwise), `order` the batch row of each packed row (`None`: the same), by the call's
        implementations `dispatch`: its top layer."""
        carried = states if states is not None else ElmoLstmStates(self.config)
        initial_states = carried.initial(batch_sizes[0], inputs, order)
        top, final_states = self.bilm(inputs, batch_sizes, initial_states, layer_inputs, dispatch)
        if states is not None:  # every row has at least one token (its <S> and </S>, or a window's)
            states.update(final_states, order)
        return top

    def _sentence_layers(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        all_layers: bool,
        states: ElmoLstmStates | None,
        keep_sentence_boundaries: bool,
        dispatch: ElmoDispatch,
    ) -> tuple[torch.Tensor, ...]:
        """
        The padded layers of `forward` on sentences (all of them, or the top one only), each (batch, words [+ 2],
        2 * projection_dim), with the boundary tokens (from position 0) or without (at the words' positions). With
        autograd, every returned layer is on the path to the outputs (docs/design-notes.md, "Layers on the graph").
        """
        packing = pack_sentences(attention_mask)
        words = input_ids.flatten(0, 1)[packing.word_positions]  # (num_words, max_chars): every word of the batch
        token_embeddings = self.char_encoder.embed_words(
            torch.cat([words, self.char_encoder.boundary_char_ids(input_ids.device)]), dispatch
        )  # <S>, </S>
        unpack = packing.unpack_sequences if keep_sentence_boundaries else packing.unpack
        on_graph = (
            all_layers
            and not keep_sentence_boundaries
            and torch.is_grad_enabled()
            and (
                token_embeddings.requires_grad or any(parameter.requires_grad for parameter in self.bilm.parameters())
            )
        )
        layers = []

        def keep_layer(packed: torch.Tensor) -> torch.Tensor:
            if not all_layers:
                return packed
            layers.append(unpack(packed))
            return packing.repack(layers[-1], packed) if on_graph else packed

        inputs = token_embeddings[packing.source]  # (2, num_packed, projection_dim), backward rows reversed
        top = self._run_bilm(inputs, packing.batch_sizes, states, packing.sort_order, keep_layer, dispatch)
        return (*layers, unpack(top))

    def _window_layers(
        self,
        input_ids: torch.Tensor,
        backward_input_ids: torch.Tensor,
        all_layers: bool,
        states: ElmoLstmStates | None,
        dispatch: ElmoDispatch,
    ) -> tuple[torch.Tensor, ...]:
        """The layers of `forward` on stream windows (all of them, or the top one only), each (batch, steps,
        2 * projection_dim): position `t` of both windows."""
        batch_size, steps, width = input_ids.shape
        # both windows, time-major: row `t * batch_size + b` is step t of stream b (a packed batch of full rows)
        char_ids = torch.stack([input_ids, backward_input_ids]).transpose(1, 2).reshape(-1, width)
        inputs = self.char_encoder.embed_words(char_ids, dispatch).view(2, steps * batch_size, -1)
        packed_layers = []

        def keep_layer(packed: torch.Tensor) -> torch.Tensor:
            if all_layers:
                packed_layers.append(packed)
            return packed

        packed_layers.append(self._run_bilm(inputs, [batch_size] * steps, states, None, keep_layer, dispatch))
        # (2, steps * batch, dim) time-major -> (batch, steps, 2 * dim)
        layers = (layer.view(2, steps, batch_size, -1).transpose(1, 2) for layer in packed_layers)
        return tuple(torch.cat([layer[0], layer[1]], dim=-1) for layer in layers)


class ElmoBiLstmTagger(nn.Module):
    """The paper's tagger: a bidirectional LSTM over the words of each sentence (any padding side)."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.lstm = nn.LSTM(
            config.hidden_size,
            config.tagger_hidden_size,
            num_layers=config.tagger_num_layers,
            batch_first=True,
            bidirectional=True,
            dropout=config.classifier_dropout if config.tagger_num_layers > 1 else 0.0,
        )

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`hidden` (batch, words, hidden_size), `mask` (batch, words) -> (batch, words, 2 * tagger_hidden_size)."""
        mask = mask.bool()
        lengths = mask.sum(dim=1)
        # move each row's words to the front (left-padded or gappy masks), run packed, then put them back
        order = torch.argsort((~mask).to(torch.int8), dim=1, stable=True)
        compact = hidden.gather(1, order.unsqueeze(-1).expand_as(hidden))
        packed = nn.utils.rnn.pack_padded_sequence(
            compact, lengths.clamp(min=1).cpu(), batch_first=True, enforce_sorted=False
        )
        output, _ = self.lstm(packed)
        output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=hidden.shape[1])
        restored = torch.empty_like(output).scatter_(1, order.unsqueeze(-1).expand_as(output), output)
        return restored * mask.unsqueeze(-1).to(restored.dtype)


class ElmoHeadModel(ElmoPreTrainedModel):
    r"""
    What the task heads share: the biLM (`self.elmo`, an [`ElmoModel`] without its own mixes), a learned scalar mix of
    all its layers, dropout and the optional BiLSTM over the words (`config.classifier_head="bilstm"`, the paper's
    tagger). Each head adds its classifier on top of `encode_words`.

    With `config.freeze_elmo=True` (default, as in the paper) the biLM runs without gradients and stays in eval mode;
    only the mix and the head train. An activation cache (see `modeling_elmo.finetuning.activation_cache`) may then be
    attached as `model.activation_cache`: `contextual_layers` takes the biLM layers of sentences already seen from it.
    """

    # ElmoModel's own mixes are not built here: ignore them in base checkpoints and in heads saved with them
    _keys_to_ignore_on_load_unexpected = [r"^(elmo\.)?scalar_mixes\.", r"^softmax\."]  # and an LM's softmax

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.elmo = ElmoModel(config, add_scalar_mixes=False)
        self.scalar_mix = ElmoScalarMix(config)
        self.dropout = nn.Dropout(config.classifier_dropout)
        self.tagger = ElmoBiLstmTagger(config) if config.classifier_head == "bilstm" else None
        self.activation_cache = None
        self.elmo.requires_grad_(not config.freeze_elmo)

    @property
    def word_vector_size(self) -> int:
        """Width of the word vectors `encode_words` returns."""
        return 2 * self.config.tagger_hidden_size if self.tagger is not None else self.config.hidden_size

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """As in [`PreTrainedModel`]; loading replaces the parameters, so the biLM is frozen again afterwards."""
        loaded = super().from_pretrained(*args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        quantized = getattr(model, "hf_quantizer", None) is not None  # a quantized biLM stays frozen
        model.elmo.requires_grad_(not (model.config.freeze_elmo or quantized))
        return loaded

    def train(self, mode: bool = True) -> "ElmoHeadModel":
        """Set the training mode of the head; a frozen biLM stays in eval mode."""
        super().train(mode)
        if self.config.freeze_elmo:
            self.elmo.eval()
        return self

    def get_input_embeddings(self) -> nn.Embedding:
        return self.elmo.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.elmo.set_input_embeddings(value)

    def elmo_layers(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor, states: ElmoLstmStates | None = None
    ) -> tuple[torch.Tensor, ...]:
        """All `num_hidden_layers + 1` biLM layers, each (batch, words, 2 * projection_dim), from `states` (updated)
        if given; no gradients if frozen."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.config.freeze_elmo):
            output = self.elmo(
                input_ids, attention_mask=attention_mask, output_hidden_states=True, states=states, return_dict=True
            )
        return output.hidden_states

    def contextual_layers(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor, states: ElmoLstmStates | None = None
    ) -> tuple[torch.Tensor, ...]:
        """`elmo_layers`, through the activation cache when one is attached (every row is one sentence, from zero
        states: `states` are refused then)."""
        if self.activation_cache is not None:
            if states is not None:
                raise ValueError("An activation cache holds layers computed from zero states: pass no states=.")
            return self.activation_cache.layers(self, input_ids, attention_mask)
        return self.elmo_layers(input_ids, attention_mask, states)

    def encode_words(self, layers: tuple[torch.Tensor, ...], mask: torch.Tensor) -> torch.Tensor:
        """
        The head's word vectors: the scalar mix of `layers` (each (batch, words, 2 * projection_dim)) with dropout,
        then the BiLSTM and dropout again if there is one. `mask` (batch, words) -> (batch, words,
        `word_vector_size`), zero at padding.
        """
        hidden = self.dropout(self.scalar_mix(layers, mask))
        if self.tagger is not None:
            hidden = self.dropout(self.tagger(hidden, mask))
        return hidden

    def scalar_mix_penalty(self) -> torch.Tensor | float:
        """The L2 penalty on the scalar-mix weights (`config.scalar_mix_l2_coef`) in training mode, else (or without
        a mix) 0."""
        if self.scalar_mix is None or not (self.config.scalar_mix_l2_coef and self.training):
            return 0.0
        return self.config.scalar_mix_l2_coef * self.scalar_mix.scalar_parameters.pow(2).sum()


class ElmoForTokenClassification(ElmoHeadModel):
    r"""
    ELMo with a token-classification head (e.g. NER): a learned scalar mix of all biLM layers, dropout, then a linear
    layer (`config.classifier_head="linear"`) or the paper's BiLSTM tagger (`"bilstm"`), optionally topped by a
    linear-chain CRF (`config.use_crf`). One prediction per word. Freezing and the activation cache: see
    [`ElmoHeadModel`].

    With a CRF, in eval mode `logits` are the emission scores with every tag off the Viterbi path lowered by 1e4: the
    argmax of each position is the Viterbi path (what `Trainer.predict` and the pipeline use) and the softmax is
    numerically one-hot. In training mode (no decoding) `logits` are the emission scores.
    """

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        self.classifier = nn.Linear(self.word_vector_size, config.num_labels)
        self.crf = LinearChainCrf(config.num_labels, self._bio_constraints(config)) if config.use_crf else None
        self.post_init()

    @staticmethod
    def _bio_constraints(config: ElmoConfig):
        """IOB2 transition constraints when every label is `O`, `B-X` or `I-X` with a matching `B-X`; else None."""
        labels = [config.id2label[index] for index in range(config.num_labels)]
        is_bio = all(label == "O" or label[:2] in ("B-", "I-") for label in labels)
        if not is_bio or any(label[:2] == "I-" and f"B-{label[2:]}" not in labels for label in labels):
            return None
        return bio_constraints(labels)

    def _loss(
        self,
        emissions: torch.Tensor,
        labels: torch.Tensor,
        mask: torch.Tensor,
        num_items_in_batch: torch.Tensor | int | None,
    ) -> torch.Tensor:
        """Mean per labelled word over `num_items_in_batch` (the Trainer's count over accumulated batches) if given."""
        labels = labels.to(emissions.device)
        if self.crf is None:
            loss = self.loss_function(emissions, labels, self.config, num_items_in_batch=num_items_in_batch)
        else:
            labels = labels.masked_fill(~mask, -100)
            nll = self.crf.neg_log_likelihood(emissions.float(), labels, mask)
            denominator = num_items_in_batch if num_items_in_batch is not None else labels.ne(-100).sum().clamp(min=1)
            loss = nll.sum() / denominator
        # the penalty once per optimizer step in total, however the Trainer splits it into accumulated batches
        share = labels.ne(-100).sum() / num_items_in_batch if num_items_in_batch is not None else 1.0
        return loss + share * self.scalar_mix_penalty()

    @document_args
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        states: ElmoLstmStates | None = None,
        **kwargs,
    ) -> TokenClassifierOutput:
        r"""
        The label scores of every word, and the loss with `labels`.

        Args:
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                Label index of every word in `[0, num_labels)`; -100 is ignored (with a CRF, such words inside a
                sentence are marginalised).

        Returns:
            [`TokenClassifierOutput`] with `logits` of shape `(batch_size, num_words, num_labels)`.
        """
        if attention_mask is None:
            attention_mask = (input_ids != 0).any(dim=-1)
        mask = attention_mask.bool()
        layers = self.contextual_layers(input_ids, attention_mask, states)
        logits = self.classifier(self.encode_words(layers, mask))

        loss = None
        if labels is not None:
            _check_indices("labels", labels, self.num_labels, ignore_index=-100)
            if labels.shape != mask.shape:
                raise ValueError(
                    f"labels must have shape {tuple(mask.shape)} (batch_size, num_words), got {tuple(labels.shape)}."
                )
            loss = self._loss(logits, labels, mask, kwargs.pop("num_items_in_batch", None))
        if self.crf is not None and not self.training:
            path = self.crf.viterbi_decode(logits.float(), mask)
            off_path = 1.0 - nn.functional.one_hot(path, self.num_labels).to(logits.dtype)
            logits = logits - 1e4 * off_path
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=layers if output_hidden_states else None)


class ElmoSentencePooler(nn.Module):
    """One vector per sentence from its word vectors: `config.classifier_pooling` over the words of each row."""

    def __init__(self, config: ElmoConfig, word_vector_size: int):
        super().__init__()
        self.pooling = config.classifier_pooling
        self.output_size = word_vector_size * (2 if self.pooling == "mean_max" else 1)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`hidden` (batch, words, size), zero at padding; `mask` (batch, words) -> (batch, `output_size`). A row
        without words pools to zeros."""
        pooled = []
        if self.pooling in ("mean", "mean_max"):
            count = mask.sum(dim=1, keepdim=True).clamp(min=1).to(hidden.dtype)
            pooled.append(hidden.sum(dim=1) / count)
        if self.pooling in ("max", "mean_max"):
            lowest = torch.finfo(hidden.dtype).min
            maximum = hidden.masked_fill(~mask.unsqueeze(-1), lowest).amax(dim=1)
            pooled.append(maximum.masked_fill(~mask.any(dim=1, keepdim=True), 0.0))
        return torch.cat(pooled, dim=-1)


class ElmoFeatureNorm(nn.BatchNorm1d):
    """Per-feature standardisation of the pooled sentence vectors (`config.classifier_batch_norm`): batch statistics
    in training, running averages in evaluation, no learned scale or shift. A training batch of one row, which has no
    variance, is standardised with the running averages."""

    def __init__(self, num_features: int):
        super().__init__(num_features, affine=False)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """`features` (batch, num_features) -> (batch, num_features)."""
        if self.training and features.shape[0] < 2:
            return nn.functional.batch_norm(
                features, self.running_mean, self.running_var, training=False, eps=self.eps
            )
        return super().forward(features)


class ElmoForSequenceClassification(ElmoHeadModel):
    r"""
    ELMo with a sentence-classification head (sentiment, topic, intent; entailment and paraphrase for text pairs): the
    word vectors of [`ElmoHeadModel`] pooled over each sentence's words (`config.classifier_pooling`; or every biLM
    layer pooled on its own, `config.classifier_concat_layers`), optionally standardised feature by feature
    (`config.classifier_batch_norm`), then a linear layer. Loss and `config.problem_type` as in
    `BertForSequenceClassification` (regression for `num_labels == 1`, single-label for integer labels, multi-label
    for float labels).

    Text pairs (`config.classifier_sentence_pairs=True`): a row holds the words of both texts, `token_type_ids` 0 for
    the first text's words and 1 for the second's (`tokenizer(texts, text_pairs)`). The biLM runs the two texts as
    separate sentences, `2 * batch_size` rows (the first texts, then the second ones: so are the rows of `states`),
    every word's `hidden_states` those of its own text; the head classifies `[u; v; |u - v|; u * v]` of the pooled
    texts `u`, `v` (docs/sequence-classification.md, "Sentence pairs").
    """

    accepts_loss_kwargs = False  # the loss is a mean per batch, as BERT's: the Trainer scales it for accumulation

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        if config.classifier_concat_layers:
            self.scalar_mix = None  # every layer is pooled on its own: no mix to learn
        self.pooler = ElmoSentencePooler(config, self.word_vector_size)
        pooled_vectors = config.num_hidden_layers + 1 if config.classifier_concat_layers else 1
        features = self.pooler.output_size * pooled_vectors * (4 if config.classifier_sentence_pairs else 1)
        self.feature_norm = ElmoFeatureNorm(features) if config.classifier_batch_norm else None
        self.classifier = nn.Linear(features, config.num_labels)
        self.post_init()

    def _sentence_masks(self, mask: torch.Tensor, token_type_ids: torch.Tensor | None) -> torch.Tensor:
        """The word mask of every sentence the batch holds: the attention mask `mask` (batch, words) for single
        texts, or for text pairs the first texts' masks followed by the second texts' (2 * batch, words), of `mask`'s
        values (the biLM checks them)."""
        pairs = self.config.classifier_sentence_pairs
        if token_type_ids is not None:
            _check_indices("token_type_ids", token_type_ids, 2)
            if token_type_ids.shape != mask.shape:
                raise ValueError(
                    f"token_type_ids must have shape {tuple(mask.shape)} (batch_size, num_words), got "
                    f"{tuple(token_type_ids.shape)}."
                )
        if not pairs:
            if token_type_ids is not None and (token_type_ids.bool() & mask.bool()).any():
                raise ValueError(
                    "token_type_ids mark words of a second text, but this model classifies single texts "
                    "(config.classifier_sentence_pairs=False); build it with classifier_sentence_pairs=True to "
                    "classify text pairs."
                )
            return mask
        if token_type_ids is None:
            raise ValueError(
                "This model classifies text pairs (config.classifier_sentence_pairs=True): give token_type_ids (0 for "
                "the first text's words, 1 for the second's), as tokenizer(texts, text_pairs) returns them."
            )
        is_second = token_type_ids.to(mask.device).bool()
        return torch.cat([mask * ~is_second, mask * is_second])

    @document_args
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.LongTensor | None = None,
        labels: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        states: ElmoLstmStates | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput:
        r"""
        The class scores of every row (a text, or a text pair: the words of both texts), and the loss with `labels`.

        Args:
            token_type_ids (`torch.LongTensor` of shape `(batch_size, num_words)`, *optional*):
                For text pairs: 0 for the first text's words, 1 for the second's (padding: any). Single texts need
                none (or all zeros).
            labels (`torch.Tensor`, *optional*):
                `(batch_size,)` class indices in `[0, num_labels)` (single-label), `(batch_size, num_labels)` floats
                (multi-label), or `(batch_size,)` floats for regression (`num_labels == 1`).

        Returns:
            [`SequenceClassifierOutput`] with `logits` of shape `(batch_size, num_labels)`.
        """
        if attention_mask is None:
            attention_mask = (input_ids != 0).any(dim=-1)
        if attention_mask.shape != input_ids.shape[:2]:
            raise ValueError(
                f"attention_mask must have shape {tuple(input_ids.shape[:2])}, got {tuple(attention_mask.shape)}."
            )
        pairs = self.config.classifier_sentence_pairs
        masks = self._sentence_masks(attention_mask, token_type_ids)
        layers = self.contextual_layers(torch.cat([input_ids, input_ids]) if pairs else input_ids, masks, states)
        words = masks.bool()
        pooled = self.pool_sentences(layers, words)
        if pairs:
            first, second = pooled.chunk(2)
            pooled = torch.cat([first, second, (first - second).abs(), first * second], dim=-1)
            # every word's layers from its own text (zero in the other text's rows)
            layers = tuple(
                first_texts + second_texts for first_texts, second_texts in (layer.chunk(2) for layer in layers)
            )
        if self.feature_norm is not None:
            pooled = self.feature_norm(pooled)
        logits = self.classifier(pooled)

        loss = None
        if labels is not None:
            loss = self._loss(logits, labels.to(logits.device)) + self.scalar_mix_penalty()
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=layers if output_hidden_states else None
        )

    def pool_sentences(self, layers: tuple[torch.Tensor, ...], words: torch.Tensor) -> torch.Tensor:
        """One vector per sentence: `layers` (each (rows, words, 2 * projection_dim)) and `words` (rows, words) ->
        (rows, `pooler.output_size`), the pooled `encode_words`; with `config.classifier_concat_layers`, each layer
        with dropout pooled on its own, concatenated: (rows, (num_hidden_layers + 1) * `pooler.output_size`)."""
        if self.scalar_mix is not None:
            return self.pooler(self.encode_words(layers, words), words)
        zero_padding = words.unsqueeze(-1).to(layers[0].dtype)
        return torch.cat([self.pooler(self.dropout(layer) * zero_padding, words) for layer in layers], dim=-1)

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """`BertForSequenceClassification`'s loss, `config.problem_type` set from `num_labels` and the labels' dtype
        when unset; the labels' shape and range are checked first."""
        if self.config.problem_type is None:
            if self.num_labels == 1:
                self.config.problem_type = "regression"
            elif labels.dtype in (torch.long, torch.int):
                self.config.problem_type = "single_label_classification"
            else:
                self.config.problem_type = "multi_label_classification"
        batch_size = logits.shape[0]
        if self.config.problem_type == "regression":
            if labels.numel() != batch_size * self.num_labels:
                raise ValueError(
                    f"labels must hold {self.num_labels} value(s) per example for regression, got shape "
                    f"{tuple(labels.shape)} for {batch_size} examples."
                )
            if self.num_labels == 1:
                return nn.functional.mse_loss(logits.squeeze(-1), labels.view(-1).to(logits.dtype))
            return nn.functional.mse_loss(logits, labels.view_as(logits).to(logits.dtype))
        if self.config.problem_type == "single_label_classification":
            _check_indices("labels", labels, self.num_labels)
            if labels.numel() != batch_size:
                raise ValueError(f"labels must have shape ({batch_size},), got {tuple(labels.shape)}.")
            return nn.functional.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1))
        if labels.shape != logits.shape:
            raise ValueError(
                f"labels must have shape {tuple(logits.shape)} (batch_size, num_labels) for multi-label "
                f"classification, got {tuple(labels.shape)}."
            )
        return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


class ElmoLmSoftmax(nn.Module):
    """The language-model softmax shared by both directions: bilm-tf's `softmax/W` (vocab, dim) and `softmax/b`."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(config.lm_vocab_size, config.projection_dim))
        self.bias = nn.Parameter(torch.empty(config.lm_vocab_size))

    def negative_log_likelihood(self, hidden: torch.Tensor, labels: torch.Tensor, chunk_rows: int = 2048):
        """Full softmax: `hidden` (n, dim), `labels` (n,) -> (n,) cross-entropies, `chunk_rows` rows of logits at a
        time (memory `chunk_rows * vocab` floats)."""
        losses = [
            nn.functional.cross_entropy(nn.functional.linear(rows, self.weight, self.bias), targets, reduction="none")
            for rows, targets in zip(hidden.split(chunk_rows), labels.split(chunk_rows), strict=True)
        ]
        return torch.cat(losses)


class ElmoForPreTraining(ElmoPreTrainedModel):
    r"""
    The ELMo biLM (`self.elmo`, an [`ElmoModel`]) with its language-model softmax of `config.lm_vocab_size` words,
    shared by the forward LM (next token) and the backward LM (previous token), for (continued) pretraining with
    bilm-tf's recipe (docs/pretraining.md): windows of sentence streams from `modeling_elmo.pretraining.streams`, a
    sampled softmax in training (`config.lm_num_negative_samples`), the full one in evaluation, dropout
    `config.lm_dropout`. In training mode row `i` of a call continues row `i` of the previous call from
    `stream_states`; in eval mode every call starts from zero states; a call given `states=` uses those.
    """

    _keys_to_ignore_on_load_unexpected = [r"^(elmo\.)?scalar_mixes\."]  # mixes of a converted ElmoModel
    accepts_loss_kwargs = False  # the loss is a mean per call: the Trainer scales it for gradient accumulation

    def __init__(self, config: ElmoConfig):
        super().__init__(config)
        if config.lm_vocab_size is None:
            raise ValueError("ElmoForPreTraining needs config.lm_vocab_size (the words of its softmax), got None.")
        self.elmo = ElmoModel(config, add_scalar_mixes=False, lstm_dropout=config.lm_dropout)
        self.softmax = ElmoLmSoftmax(config)
        self.sampler = LogUniformSampler(config.lm_vocab_size)
        self._stream_states = ElmoLstmStates(config)
        self.post_init()
        if self.elmo.char_encoder.projection.is_identity:  # bilm-tf has none there (see ElmoCharacterProjection)
            self.elmo.char_encoder.projection.requires_grad_(False)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.elmo.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.elmo.set_input_embeddings(value)

    def reset_stream_states(self) -> None:
        """Start the next training call's windows from zero LSTM states."""
        self._stream_states.reset()

    @property
    def stream_states(self) -> ElmoLstmStates:
        """The LSTM states the next training call starts from ([`ElmoLstmStates`], one row per stream). Settable,
        e.g. to resume training from a checkpoint: `ElmoLstmStates(model.config, saved.layers)`."""
        return self._stream_states

    @stream_states.setter
    def stream_states(self, states: ElmoLstmStates) -> None:
        check_states(states, self.config)
        self._stream_states = states

    def _check_labels(
        self, input_ids: torch.Tensor, labels: torch.Tensor | None, backward_labels: torch.Tensor | None
    ) -> None:
        """Refuse labels given for one direction only, out of the vocabulary or of another shape than the windows."""
        if (labels is None) != (backward_labels is None):
            raise ValueError("Give both labels and backward_labels, or neither.")
        for name, values in (("labels", labels), ("backward_labels", backward_labels)):
            if values is not None:
                _check_indices(name, values, self.config.lm_vocab_size)
                if isinstance(input_ids, torch.Tensor) and values.shape != input_ids.shape[:2]:
                    raise ValueError(
                        f"{name} must have shape {tuple(input_ids.shape[:2])}, got {tuple(values.shape)}."
                    )

    def _loss(self, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy: `hidden` (n, projection_dim), `labels` (n,)."""
        num_sampled = self.config.lm_num_negative_samples
        if not (self.training and num_sampled and num_sampled < self.config.lm_vocab_size):
            return self.softmax.negative_log_likelihood(hidden, labels).mean()
        sampled, num_tries = self.sampler.sample(num_sampled, device=hidden.device)
        losses = sampled_softmax_loss(
            self.softmax.weight,
            self.softmax.bias,
            hidden,
            labels,
            sampled,
            self.sampler.expected_count(labels, num_tries, num_sampled=num_sampled),
            self.sampler.expected_count(sampled, num_tries, num_sampled=num_sampled),
        )
        return losses.mean()

    @document_args
    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor,
        backward_input_ids: torch.LongTensor,
        labels: torch.LongTensor | None = None,
        backward_labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        states: ElmoLstmStates | None = None,
        **kwargs,
    ) -> ElmoForPreTrainingOutput:
        r"""
        The language models' losses and top layers on one window of every stream.

        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, unroll_steps, config.input_ids_width)`):
                Character ids of the forward streams' window: consecutive sentences `<S> w1 .. wn` (the `</S>` of a
                sentence is only a target).
            backward_input_ids (`torch.LongTensor` of the same shape):
                The backward streams' window: sentences reversed, `</S> wn .. w1`.
            labels (`torch.LongTensor` of shape `(batch_size, unroll_steps)`, *optional*):
                Vocabulary id of the token that follows each forward input (`w1 .. wn </S>`).
            backward_labels (`torch.LongTensor` of shape `(batch_size, unroll_steps)`, *optional*):
                The same for the backward streams (`wn .. w1 <S>`).
            output_hidden_states (`bool`, *optional*):
                Return every layer as `hidden_states`: position `t` of both windows, `[forward; backward]`.
            states (`ElmoLstmStates`, *optional*):
                The streams' LSTM states to start from, updated with the final ones. Default: `stream_states` in
                training mode, zero states (kept nowhere) in eval mode.
        """
        self._check_labels(input_ids, labels, backward_labels)
        if states is None and self.training:
            states = self._stream_states
            if states.num_rows not in (0, len(input_ids)):  # another number of streams: new streams
                states.reset()
        elif states is None:  # zero states, kept nowhere (whatever `config.stateful` says)
            states = ElmoLstmStates(self.config)
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        output = self.elmo(
            input_ids,
            backward_input_ids=backward_input_ids,
            states=states,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        # the top layer (batch, steps, 2 * dim) as the two directions (2, batch, steps, dim), laid out time-major
        # (the dropout below draws its mask in that layout)
        top = output.last_hidden_state.unflatten(-1, (2, -1)).permute(2, 1, 0, 3).contiguous().transpose(1, 2)

        loss = forward_loss = backward_loss = None
        dropout = self.config.lm_dropout if self.training else 0.0
        if labels is not None:
            outputs = nn.functional.dropout(top, dropout) if dropout else top
            forward_loss = self._loss(outputs[0].flatten(0, 1), labels.flatten().to(top.device))
            backward_loss = self._loss(outputs[1].flatten(0, 1), backward_labels.flatten().to(top.device))
            loss = 0.5 * (forward_loss + backward_loss)
        return ElmoForPreTrainingOutput(
            loss=loss,
            forward_loss=forward_loss,
            backward_loss=backward_loss,
            forward_hidden_state=top[0],
            backward_hidden_state=top[1],
            hidden_states=output.hidden_states,
        )

    @document_args
    def sentence_negative_log_likelihoods(
        self, input_ids: torch.LongTensor, attention_mask: torch.Tensor, labels: torch.LongTensor, bos: int, eos: int
    ) -> torch.Tensor:
        r"""
        The sentence-level evaluation protocol: each sentence `<S> w1 .. wn </S>` alone from zero states, full
        softmax. The forward LM's top layer at positions `<S> w1 .. wn` predicts `w1 .. wn </S>`, the backward LM's
        at `</S> wn .. w1` predicts `wn .. w1 <S>`.

        Args:
            attention_mask (`torch.Tensor` of shape `(batch_size, num_words)`):
                1 for words, 0 for padding.
            labels (`torch.LongTensor` of shape `(batch_size, num_words)`):
                Vocabulary id of every word (out-of-vocabulary words: `<UNK>`'s id).
            bos (`int`):
                Vocabulary id of `<S>`.
            eos (`int`):
                Vocabulary id of `</S>`.

        Returns:
            (2, num_predictions) cross-entropies of the forward and the backward LM, `num_predictions` = words +
            sentences of the batch.
        """
        sequences = self.elmo(
            input_ids,
            attention_mask,
            states=ElmoLstmStates(self.config),  # zero states, kept nowhere (whatever `config.stateful` says)
            keep_sentence_boundaries=True,
            return_dict=True,
        )
        packing = pack_sentences(attention_mask)
        top = packing.pack_sequences(sequences.last_hidden_state)  # (2, num_packed, dim), as the biLM ran them
        token_labels = torch.cat([labels.flatten()[packing.word_positions], labels.new_tensor([bos, eos])])
        packed_labels = token_labels[packing.source]  # (2, num_packed): each packed row's own token
        # packed row r (step t, sorted row b) is followed by row r + batch_sizes[t] if row b is still active at t + 1
        batch_sizes = torch.tensor(packing.batch_sizes, device=top.device)
        step = torch.repeat_interleave(torch.arange(len(packing.batch_sizes), device=top.device), batch_sizes)
        row = torch.arange(step.numel(), device=top.device) - (torch.cumsum(batch_sizes, 0) - batch_sizes)[step]
        has_next = row < torch.cat([batch_sizes[1:], batch_sizes.new_zeros(1)])[step]
        following = (torch.arange(step.numel(), device=top.device) + batch_sizes[step])[has_next]
        return torch.stack(
            [
                self.softmax.negative_log_likelihood(top[direction, has_next], packed_labels[direction, following])
                for direction in range(2)
            ]
        )


__all__ = [
    "ElmoLstmStates",
    "ElmoModel",
    "ElmoPreTrainedModel",
    "ElmoModelOutput",
    "ElmoForPreTraining",
    "ElmoForPreTrainingOutput",
    "ElmoForTokenClassification",
    "ElmoForSequenceClassification",
    "ElmoHeadModel",
]
