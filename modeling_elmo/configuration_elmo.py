"""`ElmoConfig`: the architecture of an ELMo biLM (character CNN, highway layers, projected LSTMs) and the settings
of the heads built on it, as the model classes, the tokenizer, the converters and the training commands read it.
Saved as `config.json`, with the `auto_map` and `custom_pipelines` that let a folder load as remote code."""

import copy
import dataclasses
import math
import typing
from collections.abc import Callable
from typing import Any

# Transformers 4.x copies from a local folder only the modules that the loaded file itself imports (5.x: all it needs):
# the lines marked "4.x remote code" import the modules of the implementations' registry, which the config reads.
from .convolution_precision import fp32_convolutions  # noqa: F401  (4.x remote code)
from .elmo_call import ElmoCall  # noqa: F401  (4.x remote code)
from .elmo_implementations import ALL_ELMO_IMPLEMENTATIONS
from .lstm_cell import LstmWeights  # noqa: F401  (4.x remote code)
from .reference_implementations import ELMO_EAGER  # noqa: F401  (4.x remote code)
from .transformers_compat import PreTrainedConfig, StrictDataclassClassValidationError, strict

# Character-CNN filters of the 'original' ELMo model: [width, number of filters].
ORIGINAL_CHAR_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
# What a saved folder answers to with `trust_remote_code=True`: the `auto_map` of every ELMo config.
AUTO_MAP = {
    "AutoConfig": "configuration_elmo.ElmoConfig",
    "AutoModel": "modeling_elmo.ElmoModel",
    "AutoModelForTokenClassification": "modeling_elmo.ElmoForTokenClassification",
    "AutoModelForSequenceClassification": "modeling_elmo.ElmoForSequenceClassification",
    "AutoModelForPreTraining": "modeling_elmo.ElmoForPreTraining",
}
# `config.custom_pipelines` of every ELMo model (the classes: `pipeline_class(name)`). "ner" is the task's alias,
# which Transformers does not resolve for declared pipelines; "pt" names the Transformers auto class that loads the
# model.
CUSTOM_PIPELINES = {
    **{
        task: {"impl": "pipeline_elmo.ElmoTokenClassificationPipeline", "pt": ["AutoModelForTokenClassification"]}
        for task in ("token-classification", "ner")
    },
    "feature-extraction": {"impl": "pipeline_elmo.ElmoFeatureExtractionPipeline", "pt": ["AutoModel"]},
}


def pipeline_class(name: str) -> type:
    """The pipeline class `name` of those that `CUSTOM_PIPELINES` names, imported on first use (so that a config loads
    without Transformers' pipelines). The relative import also makes `save_pretrained` ship `pipeline_elmo.py`."""
    from .pipeline_elmo import ElmoFeatureExtractionPipeline, ElmoTokenClassificationPipeline

    classes = {cls.__name__: cls for cls in (ElmoFeatureExtractionPipeline, ElmoTokenClassificationPipeline)}
    return classes[name]


# The config fields that define the biLM's architecture: options.json and a model folder must agree on them to
# continue pretraining one from the other.
BILM_ARCHITECTURE_FIELDS = (
    "char_input",
    "char_vocab_size",
    "max_characters_per_token",
    "char_padding_id",
    "bos_char_ids",
    "eos_char_ids",
    "word_vocab_size",
    "word_embedding_dim",
    "bos_word_id",
    "eos_word_id",
    "char_embedding_dim",
    "char_filters",
    "num_highway_layers",
    "char_activation",
    "lstm_cell_size",
    "projection_dim",
    "num_hidden_layers",
    "cell_clip",
    "proj_clip",
    "use_skip_connections",
)
# The config fields that, with the weights, decide what the biLM computes: every cache or fingerprint of biLM outputs
# keys on exactly these (docs/design-notes.md, "What the biLM fields are").
BILM_FIELDS = (*BILM_ARCHITECTURE_FIELDS, "lstm_forget_bias")
# Upper bound of `max_characters_per_token` (every word is padded to that many character ids; the originals use 50).
MAX_CHARACTERS_PER_TOKEN = 1024


class ElmoConfigError(ValueError):
    """An `ElmoConfig` value of the wrong type or out of range: `field` names it, `problem` says what is wrong."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"ElmoConfig: {field} {problem}")
        self.field = field
        self.problem = problem


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """An int or a finite float; booleans are not numbers here."""
    return _is_int(value) or (isinstance(value, float) and math.isfinite(value))


def _is_list(value: Any) -> bool:
    """A non-empty list."""
    return isinstance(value, list) and len(value) > 0


def _is_positive_int_list(value: Any) -> bool:
    """A non-empty list of positive integers."""
    return _is_list(value) and all(_is_int(n) and n >= 1 for n in value)


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a field accepts: `description` completes "must be ...", `accepts` tests any value but `None`, `nullable`
    accepts `None` too (for a config field: where its type does)."""

    description: str
    accepts: Callable[[Any], bool]
    nullable: bool = False

    def problem(self, value: Any, *, nullable: bool, null: str = "None", shown: str | None = None) -> str | None:
        """Why `value` is refused ("must be ..., got ..."), or `None` when it is accepted."""
        if (value is None and nullable) or (value is not None and self.accepts(value)):
            return None
        alternative = f" or {null}" if nullable else ""
        return f"must be {self.description}{alternative}, got {repr(value) if shown is None else shown}"

    def __call__(self, default: Any = None, *, lexicon: "Rule | None" = None) -> Any:
        """A config field checked by this rule, as huggingface_hub's `as_validated_field` declares one
        (`size: int = POSITIVE_INT(default=4)`); `lexicon`, the rule instead with `char_input="lexicon"`."""
        return dataclasses.field(default=default, metadata={"rule": self, "lexicon_rule": lexicon or self})


def _one_of(*choices: str) -> Rule:
    return Rule("one of " + ", ".join(map(repr, choices)), lambda value: isinstance(value, str) and value in choices)


def _integer_at_least(minimum: int, note: str = "") -> Rule:
    return Rule(f"an integer >= {minimum}{note}", lambda value: _is_int(value) and value >= minimum)


_POSITIVE_INT = Rule("a positive integer", lambda value: _is_int(value) and value >= 1)
_NON_NEGATIVE_INT = Rule("a non-negative integer", lambda value: _is_int(value) and value >= 0)
_POSITIVE_NUMBER = Rule("a positive number", lambda value: _is_number(value) and value > 0)
_NON_NEGATIVE_NUMBER = Rule("a non-negative number", lambda value: _is_number(value) and value >= 0)
_BOOLEAN = Rule("a boolean", lambda value: isinstance(value, bool))
_CHAR_IDS = Rule("a non-empty list of positive integers", _is_positive_int_list)
_CHAR_FILTERS = Rule(
    "a non-empty list of [width, num_filters] pairs of positive integers",
    lambda value: _is_list(value) and all(_is_positive_int_list(spec) and len(spec) == 2 for spec in value),
)


def field_rules(config_class: type, char_input: str = "bytes") -> dict[str, Rule]:
    """The rule declared with each field of `config_class` (see `Rule.__call__`) for a config of `char_input`, which
    accepts `None` where the field's type does."""
    return {
        field.name: dataclasses.replace(
            field.metadata["lexicon_rule" if char_input == "lexicon" else "rule"],
            nullable=type(None) in typing.get_args(field.type),
        )
        for field in dataclasses.fields(config_class)
        if "rule" in field.metadata
    }


def _with_field_rules(cls: type[PreTrainedConfig]) -> type[PreTrainedConfig]:
    """Check every assignment against the rule declared with the field before `@strict`'s type check, and raise the
    errors of the class validators (`validate_*`) as they are: `@strict` wraps them in
    `StrictDataclassClassValidationError`, which is not a `ValueError`."""
    strict_setattr, strict_validate = cls.__setattr__, cls.validate
    rules = {char_input: field_rules(cls, char_input) for char_input in ("bytes", "lexicon")}

    def __setattr__(self, name: str, value: Any) -> None:
        rule = rules[getattr(self, "char_input", "bytes")].get(name)
        problem = rule.problem(value, nullable=rule.nullable) if rule else None
        if problem:
            raise ElmoConfigError(name, problem)
        strict_setattr(self, name, value)

    def validate(self) -> None:
        try:
            strict_validate(self)
        except StrictDataclassClassValidationError as error:
            if isinstance(error.__cause__, ElmoConfigError):
                raise error.__cause__ from None
            raise

    validate.__is_defined_by_strict_decorator__ = True  # lets `@strict` subclasses replace it, as with its own
    cls.__setattr__, cls.validate = __setattr__, validate
    return cls


@_with_field_rules
@strict
class ElmoConfig(PreTrainedConfig):
    r"""
    Configuration of an ELMo biLM (Peters et al., 2018): a character CNN with highway layers feeding a stack of
    forward and backward LSTMs with projection. The defaults give the 'original' English model (2 layers, LSTM
    4096/512, 2048 character filters).

    Every field is checked on construction (`from_pretrained` included) and on assignment: a value of the wrong type
    (booleans must be `bool`, integers `int`, never `bool` or `float`; numbers finite) or out of range raises
    [`ElmoConfigError`], a `ValueError` naming the field. Each field's rule is declared with its default below.

    Input (`char_input` to `eos_word_id` below): `input_ids` hold `max_characters_per_token` character ids per word,
    then, when the model has a word embedding, the word's id (`input_ids_width` columns in all). Id 0 is padding in
    both: a padded word is an all-zero row.

    Args:
        char_input (`str`, defaults to `"bytes"`):
            What the character ids are: `"bytes"` (the original vocabulary: UTF-8 bytes and fixed markers, see
            `character_ids.py`) or `"lexicon"` (a learned lexicon of Unicode characters saved with the tokenizer, as
            in ELMoForManyLangs: id `i + 1` is the lexicon's entry `i`).
        char_vocab_size (`int`, defaults to 262):
            Rows of the character embedding: 0 is padding, then the 261 characters of the original vocabulary
            (256 bytes, begin/end of sentence, begin/end of word, character padding); with `char_input="lexicon"`,
            0 then the lexicon (`len(lexicon) + 1`, at least 2).
        char_padding_id (`int`, *optional*):
            `"lexicon"` only: the id that fills a word's row after its characters (it has an embedding row of its own).
        bos_char_ids (`list[int]`, *optional*):
            `"lexicon"` only: the character ids of the sentence-start token the model inserts, padded to
            `max_characters_per_token` with `char_padding_id`.
        eos_char_ids (`list[int]`, *optional*):
            `"lexicon"` only: the same for the sentence-end token.
        word_vocab_size (`int`, *optional*):
            `"lexicon"` only: rows of an optional word embedding (0 is padding, then the word lexicon), whose vector
            is concatenated before the character features: the projection reads `[word; char features]`.
        word_embedding_dim (`int`, *optional*):
            Size of a word embedding (given with `word_vocab_size`).
        bos_word_id (`int`, *optional*):
            Word id of the sentence-start token the model inserts (with a word embedding).
        eos_word_id (`int`, *optional*):
            Word id of the sentence-end token the model inserts (with a word embedding).
        max_characters_per_token (`int`, defaults to 50):
            Characters per word, begin/end-of-word markers included: 3 to 1024, and at least the widest filter.
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
            Clip the LSTM cell state to `[-cell_clip, cell_clip]` (`cell_clip > 0`); `None` disables it.
        proj_clip (`float`, *optional*, defaults to 3.0):
            Clip the projected LSTM output to `[-proj_clip, proj_clip]` (`proj_clip > 0`); `None` disables it.
        use_skip_connections (`bool`, defaults to `True`):
            Add each LSTM layer's input to its output for every layer after the first.
        lstm_forget_bias (`float`, defaults to 1.0):
            Added to the forget gate's pre-activation at run time, as TensorFlow's `LSTMCell(forget_bias=1.0)` does;
            the stored LSTM `bias` is the original's `B`. A saved config without this field loads with `0.0` (its
            bias holds the 1.0).
        num_output_representations (`int`, defaults to 0):
            Number of learned scalar mixes of all layers returned as `elmo_representations`.
        scalar_mix_layer_norm (`bool`, defaults to `False`):
            Layer-normalise each layer (over unpadded positions) before a scalar mix, as in the paper.
        scalar_mix_layer_norm_scope (`str`, defaults to `"sentence"`):
            What that normalisation averages over: `"sentence"` (each sentence's own words) or `"batch"` (all words
            of the batch, as AllenNLP's `ScalarMix`). A saved config with `scalar_mix_layer_norm` on but without this
            field loads as `"batch"`.
        stateful (`bool`, defaults to `False`):
            Carry the LSTM states of each batch row over to the same row of the next call, like the original
            TensorFlow biLM: the model keeps its own `ElmoLstmStates` and passes it as `states=` itself. The default
            starts every call from zero states (unless a call is given `states=`).
        classifier_head (`str`, defaults to `"linear"`):
            Head of [`ElmoForTokenClassification`] and [`ElmoForSequenceClassification`] over the scalar mix of all
            biLM layers: `"linear"` (one linear layer) or `"bilstm"` (the paper's tagger: a bidirectional LSTM over
            the words, then a linear layer; for sentences the BiLSTM runs before the pooling).
        tagger_hidden_size (`int`, defaults to 200):
            Hidden size per direction of the `"bilstm"` head.
        tagger_num_layers (`int`, defaults to 1):
            Layers of the `"bilstm"` head.
        classifier_pooling (`str`, defaults to `"mean_max"`):
            How [`ElmoForSequenceClassification`] turns the word vectors of a sentence into one vector: `"mean"`,
            `"max"` (per feature, over the sentence's words) or `"mean_max"` (both, concatenated). A sentence without
            words pools to zeros.
        classifier_sentence_pairs (`bool`, defaults to `False`):
            Make [`ElmoForSequenceClassification`] classify pairs of texts (entailment, paraphrase): each row holds
            both texts, told apart by `token_type_ids` (as `tokenizer(texts, text_pairs)` gives them); each text runs
            through the biLM as a sentence of its own, and the head reads `[u; v; |u - v|; u * v]` of their pooled
            vectors `u`, `v`. Fixed when the model is built (the classifier's input width depends on it).
        classifier_batch_norm (`bool`, defaults to `False`):
            Standardise each feature of [`ElmoForSequenceClassification`]'s pooled vector with batch statistics
            (`BatchNorm1d` without a learned scale and shift; running averages at evaluation) before the linear layer.
        classifier_concat_layers (`bool`, defaults to `False`):
            Make [`ElmoForSequenceClassification`] pool each biLM layer on its own and concatenate the
            `num_hidden_layers + 1` pooled vectors (dropout on each layer first) instead of pooling their scalar mix
            (there is then no mix). Fixed when the model is built (the classifier's input width depends on it).
            Linear head only (`classifier_head="linear"`).
        classifier_dropout (`float`, defaults to 0.5):
            Dropout on the mixed ELMo vectors (on each layer with `classifier_concat_layers`) and on the BiLSTM
            output.
        use_crf (`bool`, defaults to `False`):
            Top the head with a linear-chain CRF: its negative log-likelihood is the loss and predictions are the
            Viterbi path (IOB2 transitions such as `O -> I-PER` are forbidden when the labels are `B-`/`I-`/`O`).
            Token classification only: [`ElmoForSequenceClassification`] has no CRF and ignores it.
        freeze_elmo (`bool`, defaults to `True`):
            Keep the biLM fixed (run without gradients, in eval mode); only the scalar mix and the head train.
        scalar_mix_l2_coef (`float`, defaults to 0.0):
            L2 penalty on the (unnormalised) scalar-mix weights, added to the training loss (`lambda` in the paper).
        lm_vocab_size (`int`, *optional*):
            Words of the language-model softmax of [`ElmoForPreTraining`] (bilm-tf's `n_tokens_vocab`, the
            `vocab.txt` saved with it). `None`: no softmax (an embedder only).
        lm_dropout (`float`, defaults to 0.1):
            Dropout of [`ElmoForPreTraining`] in training where bilm-tf applies it: on every LSTM layer's input and
            on the top layer's output (bilm-tf's `dropout`).
        lm_num_negative_samples (`int`, *optional*, defaults to 8192):
            Negatives per batch of the sampled softmax used in training (bilm-tf's `n_negative_samples_batch`);
            `None` trains with the full softmax. Evaluation always uses the full softmax.
    """

    model_type = "elmo"
    # `vocab_size`, as tools read it (rows of the input embedding), is the character vocabulary
    attribute_map = {"vocab_size": "char_vocab_size"}

    # each field's rule (`Rule.__call__`); `None` is accepted where the type allows it
    char_input: str = _one_of("bytes", "lexicon")(default="bytes")  # before `char_vocab_size`: its range depends on it
    char_vocab_size: int = _integer_at_least(262)(default=262, lexicon=_integer_at_least(2))
    max_characters_per_token: int = Rule(
        f"an integer from 3 to {MAX_CHARACTERS_PER_TOKEN}",
        lambda value: _is_int(value) and 3 <= value <= MAX_CHARACTERS_PER_TOKEN,
    )(default=50)
    char_embedding_dim: int = _POSITIVE_INT(default=16)
    char_filters: list[list[int]] | None = _CHAR_FILTERS(default=None)
    num_highway_layers: int = _NON_NEGATIVE_INT(default=2)
    char_activation: str = _one_of("relu", "tanh")(default="relu")
    lstm_cell_size: int = _POSITIVE_INT(default=4096)
    projection_dim: int = _POSITIVE_INT(default=512)
    num_hidden_layers: int = _POSITIVE_INT(default=2)
    cell_clip: float | int | None = _POSITIVE_NUMBER(default=3.0)
    proj_clip: float | int | None = _POSITIVE_NUMBER(default=3.0)
    use_skip_connections: bool = _BOOLEAN(default=True)
    lstm_forget_bias: float | int = Rule("a finite number", _is_number)(default=1.0)
    num_output_representations: int = _NON_NEGATIVE_INT(default=0)
    scalar_mix_layer_norm: bool = _BOOLEAN(default=False)
    scalar_mix_layer_norm_scope: str = _one_of("sentence", "batch")(default="sentence")
    stateful: bool = _BOOLEAN(default=False)
    initializer_range: float = _NON_NEGATIVE_NUMBER(default=0.02)
    pad_token_id: int | None = _NON_NEGATIVE_INT(default=0)
    classifier_head: str = _one_of("linear", "bilstm")(default="linear")
    tagger_hidden_size: int = _POSITIVE_INT(default=200)
    tagger_num_layers: int = _POSITIVE_INT(default=1)
    classifier_pooling: str = _one_of("mean", "max", "mean_max")(default="mean_max")
    classifier_sentence_pairs: bool = _BOOLEAN(default=False)
    classifier_batch_norm: bool = _BOOLEAN(default=False)
    classifier_concat_layers: bool = _BOOLEAN(default=False)
    classifier_dropout: float | int = Rule(
        "a number from 0 to 1", lambda value: _is_number(value) and 0 <= value <= 1
    )(default=0.5)
    use_crf: bool = _BOOLEAN(default=False)
    freeze_elmo: bool = _BOOLEAN(default=True)
    scalar_mix_l2_coef: float | int = _NON_NEGATIVE_NUMBER(default=0.0)
    lm_vocab_size: int | None = _integer_at_least(3, " (<S>, </S> and <UNK> at least)")(default=None)
    lm_dropout: float | int = Rule(
        "a number from 0 to 1 (excluded)", lambda value: _is_number(value) and 0 <= value < 1
    )(default=0.1)
    lm_num_negative_samples: int | None = _POSITIVE_INT(default=8192)
    char_padding_id: int | None = _POSITIVE_INT(default=None)
    bos_char_ids: list[int] | None = _CHAR_IDS(default=None)
    eos_char_ids: list[int] | None = _CHAR_IDS(default=None)
    word_vocab_size: int | None = _integer_at_least(2)(default=None)
    word_embedding_dim: int | None = _POSITIVE_INT(default=None)
    bos_word_id: int | None = _POSITIVE_INT(default=None)
    eos_word_id: int | None = _POSITIVE_INT(default=None)

    def __post_init__(self, **kwargs):
        # the model's implementation (`ElmoPreTrainedModel.set_implementation`), held here as `attn_implementation` is
        # and, like it, never saved: a folder loads with the defaults for the device it runs on; a name that is not
        # registered, or cannot run here, is refused
        kwargs.pop("_elmo_implementation", None)
        self._elmo_implementation: str | None = kwargs.pop("elmo_implementation", None)
        ALL_ELMO_IMPLEMENTATIONS.check_name(self._elmo_implementation)
        # every saved folder answers to all its Auto classes and declares its pipeline (see pipeline_elmo.py)
        kwargs["auto_map"] = {**AUTO_MAP, **(kwargs.get("auto_map") or {})}
        kwargs.setdefault("custom_pipelines", copy.deepcopy(CUSTOM_PIPELINES))
        # Transformers 4.x's pipeline() loads the tokenizer of a remote-code model only when the config names it
        kwargs.setdefault("tokenizer_class", "ElmoTokenizer")
        # the labels as given: fields under Transformers 5.x, keywords under 4.x (set by the base class below)
        id2label = kwargs.get("id2label", getattr(self, "id2label", None))
        label2id = kwargs.get("label2id", getattr(self, "label2id", None))
        num_labels = kwargs.get("num_labels")
        if num_labels is not None and id2label is not None and len(id2label) != num_labels:
            raise ValueError(f"num_labels={num_labels} does not match id2label, which has {len(id2label)} labels.")
        if id2label is not None and label2id is not None:
            inverse = {label: int(index) for index, label in id2label.items()}
            if inverse != {label: int(index) for label, index in label2id.items()}:
                raise ValueError(f"label2id {label2id} is not the inverse of id2label {id2label}.")
        if self.char_filters is None:
            self.char_filters = [list(f) for f in ORIGINAL_CHAR_FILTERS]
        super().__post_init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs) -> "ElmoConfig":
        """As [`PreTrainedConfig.from_dict`] (`from_pretrained` and `AutoConfig` load through it), with the defaults of
        configs saved before two fields: `scalar_mix_layer_norm_scope="batch"` (with layer norm on) and
        `lstm_forget_bias=0.0`."""
        if config_dict.get("scalar_mix_layer_norm") and "scalar_mix_layer_norm_scope" not in config_dict:
            config_dict = {**config_dict, "scalar_mix_layer_norm_scope": "batch"}
        if "lstm_forget_bias" not in config_dict:  # saved with the forget bias folded into the LSTM bias
            config_dict = {**config_dict, "lstm_forget_bias": 0.0}
        return super().from_dict(config_dict, **kwargs)

    def to_dict(self) -> dict[str, Any]:
        """As [`PreTrainedConfig.to_dict`], without the model's choice of implementation (not saved)."""
        output = super().to_dict()
        output.pop("_elmo_implementation", None)
        return output

    def validate_architecture(self) -> None:
        """Part of `@strict` validation: every character filter must fit in a word."""
        widest = max(width for width, _ in self.char_filters)
        if widest > self.max_characters_per_token:
            raise ElmoConfigError(
                "max_characters_per_token",
                f"must be at least {widest} (the widest character filter), got {self.max_characters_per_token}",
            )

    def validate_head(self) -> None:
        """Part of `@strict` validation: the pooled layers are concatenated for the linear head only (the BiLSTM
        reads one vector per word)."""
        if self.classifier_concat_layers and self.classifier_head != "linear":
            raise ElmoConfigError(
                "classifier_concat_layers", f"must be False with classifier_head={self.classifier_head!r}"
            )

    def validate_input(self) -> None:
        """Part of `@strict` validation: the input fields fit together (see "Input" above)."""
        lexicon_fields = ("char_padding_id", "bos_char_ids", "eos_char_ids")
        word_fields = ("word_vocab_size", "word_embedding_dim", "bos_word_id", "eos_word_id")
        if self.char_input == "bytes":
            problem = FIELD_RULES["char_vocab_size"].problem(self.char_vocab_size, nullable=False)
            if problem:
                raise ElmoConfigError("char_vocab_size", problem)
            for name in (*lexicon_fields, *word_fields):
                if getattr(self, name) is not None:
                    raise ElmoConfigError(name, "must be None with char_input='bytes' (it describes a lexicon)")
            return
        for name in lexicon_fields:
            if getattr(self, name) is None:
                raise ElmoConfigError(name, "must be given with char_input='lexicon'")
        for name in ("bos_char_ids", "eos_char_ids"):
            ids = getattr(self, name)
            if len(ids) > self.max_characters_per_token or max(ids) >= self.char_vocab_size:
                raise ElmoConfigError(
                    name,
                    f"must hold at most max_characters_per_token ({self.max_characters_per_token}) ids below "
                    f"char_vocab_size ({self.char_vocab_size}), got {ids!r}",
                )
        if self.char_padding_id >= self.char_vocab_size:
            raise ElmoConfigError(
                "char_padding_id",
                f"must be below char_vocab_size ({self.char_vocab_size}), got {self.char_padding_id}",
            )
        given = [getattr(self, name) is not None for name in word_fields]
        if any(given) and not all(given):
            missing = [name for name, present in zip(word_fields, given, strict=True) if not present][0]
            raise ElmoConfigError(missing, "must be given with the other word-embedding fields " + str(word_fields))
        for name in ("bos_word_id", "eos_word_id"):
            if all(given) and getattr(self, name) >= self.word_vocab_size:
                raise ElmoConfigError(
                    name, f"must be below word_vocab_size ({self.word_vocab_size}), got {getattr(self, name)}"
                )

    @property
    def has_word_embeddings(self) -> bool:
        """Whether the token embedding reads a word id too (the last column of `input_ids`)."""
        return self.word_vocab_size is not None

    @property
    def input_ids_width(self) -> int:
        """Columns of `input_ids` per word: the character ids, then the word id when there is a word embedding."""
        return self.max_characters_per_token + int(self.has_word_embeddings)

    @property
    def hidden_size(self) -> int:
        """Width of every output layer: forward and backward halves."""
        return 2 * self.projection_dim

    @property
    def num_char_filters(self) -> int:
        """Total number of character-CNN filters (input width of the highway layers)."""
        return sum(n for _, n in self.char_filters)

    @property
    def token_features(self) -> int:
        """Input width of the token projection: the word embedding (if any), then the character features."""
        return (self.word_embedding_dim or 0) + self.num_char_filters


# The rule of every field, read from the fields (the options reader of the original format checks its keys with them).
FIELD_RULES = field_rules(ElmoConfig)

__all__ = [
    "BILM_ARCHITECTURE_FIELDS",
    "BILM_FIELDS",
    "CUSTOM_PIPELINES",
    "ElmoConfig",
    "ElmoConfigError",
    "pipeline_class",
]
