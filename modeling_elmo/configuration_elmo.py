"""ELMo model configuration."""

from huggingface_hub.dataclasses import strict
from transformers import PreTrainedConfig

# Character-CNN filters of the 'original' ELMo model: [width, number of filters].
ORIGINAL_CHAR_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


@strict
class ElmoConfig(PreTrainedConfig):
    r"""
    Configuration of an ELMo biLM (Peters et al., 2018): a character CNN with highway layers feeding a stack of
    forward and backward LSTMs with projection. The defaults give the 'original' English model (2 layers, LSTM
    4096/512, 2048 character filters).

    Args:
        char_vocab_size (`int`, defaults to 262):
            Rows of the character embedding: 0 is padding, then the 261 characters of the original vocabulary
            (256 bytes, begin/end of sentence, begin/end of word, character padding).
        max_characters_per_token (`int`, defaults to 50):
            Characters per word, begin/end-of-word markers included.
        char_embedding_dim (`int`, defaults to 16):
            Size of a character embedding.
        char_filters (`list[list[int]]`, *optional*):
            `[width, num_filters]` of each character convolution. Defaults to the 'original' model's filters.
        num_highway_layers (`int`, defaults to 2):
            Highway layers after the character convolutions.
        char_activation (`str`, defaults to `"relu"`):
            Activation after the max-pooled convolutions, `"relu"` or `"tanh"`.
        lstm_cell_size (`int`, defaults to 4096):
            Size of the LSTM cell state (`lstm.dim` in the original options).
        projection_dim (`int`, defaults to 512):
            Size of the projected LSTM output and of the token embedding. Every layer's output has width
            `2 * projection_dim` (forward and backward halves).
        num_hidden_layers (`int`, defaults to 2):
            LSTM layers per direction.
        cell_clip (`float`, *optional*, defaults to 3.0):
            Clip the LSTM cell state to `[-cell_clip, cell_clip]`; `None` disables it.
        proj_clip (`float`, *optional*, defaults to 3.0):
            Clip the projected LSTM output to `[-proj_clip, proj_clip]`; `None` disables it.
        use_skip_connections (`bool`, defaults to `True`):
            Add each LSTM layer's input to its output for every layer after the first.
        num_output_representations (`int`, defaults to 0):
            Number of learned scalar mixes of all layers returned as `elmo_representations`.
        scalar_mix_layer_norm (`bool`, defaults to `False`):
            Layer-normalise each layer (over unpadded positions) before a scalar mix, as in the paper.
        stateful (`bool`, defaults to `False`):
            Carry the LSTM states of each batch row over to the same row of the next call, like the original
            TensorFlow biLM. The default starts every call from zero states.
        classifier_head (`str`, defaults to `"linear"`):
            Head of [`ElmoForTokenClassification`] over the scalar mix of all biLM layers: `"linear"` (one linear
            layer) or `"bilstm"` (the paper's tagger: a bidirectional LSTM, then a linear layer).
        tagger_hidden_size (`int`, defaults to 200):
            Hidden size per direction of the `"bilstm"` tagger.
        tagger_num_layers (`int`, defaults to 1):
            Layers of the `"bilstm"` tagger.
        classifier_dropout (`float`, defaults to 0.5):
            Dropout on the mixed ELMo vectors and on the tagger output.
        use_crf (`bool`, defaults to `False`):
            Top the head with a linear-chain CRF: its negative log-likelihood is the loss and predictions are the
            Viterbi path (IOB2 transitions such as `O -> I-PER` are forbidden when the labels are `B-`/`I-`/`O`).
        freeze_elmo (`bool`, defaults to `True`):
            Keep the biLM fixed (run without gradients, in eval mode); only the scalar mix and the head train.
        scalar_mix_l2_coef (`float`, defaults to 0.0):
            L2 penalty on the (unnormalised) scalar-mix weights, added to the training loss (`lambda` in the paper).
    """

    model_type = "elmo"

    char_vocab_size: int = 262
    max_characters_per_token: int = 50
    char_embedding_dim: int = 16
    char_filters: list[list[int]] | None = None
    num_highway_layers: int = 2
    char_activation: str = "relu"
    lstm_cell_size: int = 4096
    projection_dim: int = 512
    num_hidden_layers: int = 2
    cell_clip: float | int | None = 3.0
    proj_clip: float | int | None = 3.0
    use_skip_connections: bool = True
    num_output_representations: int = 0
    scalar_mix_layer_norm: bool = False
    stateful: bool = False
    initializer_range: float = 0.02
    pad_token_id: int | None = 0
    classifier_head: str = "linear"
    tagger_hidden_size: int = 200
    tagger_num_layers: int = 1
    classifier_dropout: float | int = 0.5
    use_crf: bool = False
    freeze_elmo: bool = True
    scalar_mix_l2_coef: float | int = 0.0

    def __post_init__(self, **kwargs):
        num_labels = kwargs.get("num_labels")
        if num_labels is not None and self.id2label is not None and len(self.id2label) != num_labels:
            raise ValueError(
                f"num_labels={num_labels} does not match id2label, which has {len(self.id2label)} labels."
            )
        if self.id2label is not None and self.label2id is not None:
            inverse = {label: int(index) for index, label in self.id2label.items()}
            if inverse != {label: int(index) for label, index in self.label2id.items()}:
                raise ValueError(f"label2id {self.label2id} is not the inverse of id2label {self.id2label}.")
        if self.char_filters is None:
            self.char_filters = [list(f) for f in ORIGINAL_CHAR_FILTERS]
        super().__post_init__(**kwargs)

    def validate_architecture(self):
        """Part of `@strict` validation: reject architectures that cannot be built."""
        if self.char_activation not in ("relu", "tanh"):
            raise ValueError(f"char_activation must be 'relu' or 'tanh', got {self.char_activation!r}.")
        for spec in self.char_filters:
            if len(spec) != 2 or min(spec) < 1:
                raise ValueError(f"char_filters entries must be [width, num_filters] >= 1, got {spec!r}.")
            if spec[0] > self.max_characters_per_token:
                raise ValueError(
                    f"char_filters width {spec[0]} exceeds max_characters_per_token {self.max_characters_per_token}."
                )
        if self.num_hidden_layers < 1:
            raise ValueError(f"num_hidden_layers must be >= 1, got {self.num_hidden_layers}.")
        if self.classifier_head not in ("linear", "bilstm"):
            raise ValueError(f"classifier_head must be 'linear' or 'bilstm', got {self.classifier_head!r}.")

    @property
    def hidden_size(self) -> int:
        """Width of every output layer: forward and backward halves."""
        return 2 * self.projection_dim

    @property
    def num_char_filters(self) -> int:
        """Total number of character-CNN filters (input width of the highway layers)."""
        return sum(n for _, n in self.char_filters)


__all__ = ["ElmoConfig"]
