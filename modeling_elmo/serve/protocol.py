"""
The HTTP API's request bodies, read and checked, and its error body: OpenAI's `POST /v1/embeddings` and this
server's per-word route `POST /v1/word-embeddings` (docs/serving.md). Standard library only: the checks are the same
for `elmo serve` and the Ray Serve deployment, and run in-process in the unit tests.

Every refusal is an `ApiError`: an HTTP status and OpenAI's error body, `{"error": {"message", "type", "param",
"code"}}`, whose `param` names the field (`input`, `input[3]`, `encoding_format`, ...) and whose message is one line
that begins with it. A malformed or mistyped body is 400; a body over the size limits (bytes, inputs, words per
input) is 413, before any work.
"""

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

ENCODING_FORMATS = ("float", "base64")
LAYER_NAMES = ("all", "top", "average")  # the per-word route's `layers` by name; or a list of layer indices
NO_DIMENSIONS = (
    "ELMo has no Matryoshka training, so a shortened vector is not a sentence vector: give the model's width or "
    "leave it out"
)
FLOAT32_MAX = 3.4028234663852886e38  # the largest finite float32: the model's and the responses' numbers


@dataclass(eq=False)
class ApiError(Exception):
    """A refused request: HTTP `status`, OpenAI's error `type`, the field it concerns (`param`) and a one-line
    `message` (beginning with the field)."""

    status: int
    message: str
    param: str | None = None
    type: str = "invalid_request_error"
    code: str | None = None

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict:
        """OpenAI's error body."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


def bad_field(param: str, what: str) -> ApiError:
    """400 for the field `param`: `what` it must be, or what is wrong with it."""
    return ApiError(400, f"{param}: {what}", param)


def too_large(param: str, what: str) -> ApiError:
    """413 for the field `param` (a size limit)."""
    return ApiError(413, f"{param}: {what}", param, code="too_large")


BODY_BYTES_PER_WORD = 16  # the default body limit per word a request may hold (a word, a space, JSON's escapes)
# the longest JSON number of a float32 value (Python's shortest repr of its double, up to 17 digits):
# "-1.1754943508222875e-38" or "-0.00012345678901234567" (about 19 on average: docs/serving.md)
FLOAT_JSON_BYTES = 23
JSON_ESCAPED = re.compile(r'[\x00-\x1f"\\]')  # what JSON escapes in a string: 2 bytes ("\n", '\\"'), or 6 ("\u0001")
ASCII_ESCAPED_CHAR_BYTES = 12  # a character as JSON's ASCII escape at most: an astral one is "\ud83d\ude00"


@dataclass(frozen=True)
class Limits:
    """The size limits of one request (`elmo serve --max-body-bytes`, `--max-inputs`, `--max-words`,
    `--max-response-bytes`). The body limit follows the others unless given: `inputs` x `words_per_input` x
    `BODY_BYTES_PER_WORD` (16 MiB by default). `response_bytes` bounds the response a request asks for (its
    upper bound, `response_bytes`, before any model work)."""

    body_bytes: int | None = None
    inputs: int = 2048  # as OpenAI's
    words_per_input: int = 512
    response_bytes: int = 64 * 2**20

    def __post_init__(self) -> None:
        if self.body_bytes is None:
            object.__setattr__(self, "body_bytes", self.inputs * self.words_per_input * BODY_BYTES_PER_WORD)


@dataclass(frozen=True)
class ScalarMix:
    """The per-word route's scalar mix: `gamma * sum_k softmax(weights)_k * layer_k` (AllenNLP's `ScalarMix`)."""

    weights: tuple[float, ...]
    gamma: float = 1.0


@dataclass(frozen=True)
class EmbeddingsRequest:
    """A checked request of either route: its texts split into words (`words[i]` for `texts[i]`, with each word's
    character `offsets`), the response's encoding, and for the per-word route the layers (indices) or the mix."""

    texts: list[str]
    words: list[list[str]]
    offsets: list[list[tuple[int, int]]]
    encoding_format: str
    model: str | None
    layers: tuple[int, ...] | str | None = None
    scalar_mix: ScalarMix | None = None

    @property
    def word_count(self) -> int:
        return sum(len(words) for words in self.words)


Splitter = Callable[[str], list[tuple[str, int, int]]]  # text -> [(word, start, end)] (`ElmoTokenizer.split_words`)

OPENAI_FIELDS = frozenset({"input", "model", "encoding_format", "dimensions", "user"})
WORD_FIELDS = frozenset({"input", "model", "encoding_format", "layers", "scalar_mix"})


def parse_body(body: bytes, limits: Limits) -> dict:
    """The JSON object of a request body: 413 over `limits.body_bytes`, 400 where it is not a JSON object."""
    if len(body) > limits.body_bytes:
        raise too_large("body", f"{len(body)} bytes, over the limit of {limits.body_bytes} (--max-body-bytes)")
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise bad_field("body", f"not JSON ({error})") from None
    if not isinstance(document, dict):
        raise bad_field("body", f"a JSON object, got {_kind(document)}")
    return document


def parse_openai_request(
    document: dict, limits: Limits, split: Splitter, width: int | None = None
) -> EmbeddingsRequest:
    """`POST /v1/embeddings`'s body (OpenAI's shape), checked; `dimensions` is accepted where it is the model's
    `width` (the vectors are that wide anyway) and refused otherwise (`NO_DIMENSIONS`)."""
    _refuse_unknown(document, OPENAI_FIELDS)
    dimensions = document.get("dimensions")
    exact = isinstance(dimensions, int) and not isinstance(dimensions, bool) and dimensions == width
    if dimensions is not None and not exact:
        raise bad_field("dimensions", f"only {width} (the model's width): {NO_DIMENSIONS}; got {dimensions!r:.40}")
    if "user" in document and not isinstance(document["user"], str):
        raise bad_field("user", f"a string, got {_kind(document['user'])}")
    return _parse_common(document, limits, split)


def parse_word_request(document: dict, limits: Limits, split: Splitter, num_layers: int) -> EmbeddingsRequest:
    """`POST /v1/word-embeddings`'s body, checked: `layers` (a name of `LAYER_NAMES` or a list of distinct indices
    below `num_layers`; default "all") or `scalar_mix` (`{"weights": [num_layers numbers], "gamma": number}`)."""
    _refuse_unknown(document, WORD_FIELDS)
    request = _parse_common(document, limits, split)
    if "layers" in document and "scalar_mix" in document:
        raise bad_field("layers", "give layers or scalar_mix, not both")
    if "scalar_mix" in document:
        return replace(request, scalar_mix=_parse_scalar_mix(document["scalar_mix"], num_layers))
    return replace(request, layers=_parse_layers(document.get("layers", "all"), num_layers))


def compact_json(value: Any) -> bytes:
    """`value` as the responses' JSON: compact, UTF-8 (Starlette's `JSONResponse`'s form); where a string holds a
    lone surrogate (sent as the escape "\\ud800"), as ASCII with escapes, so that it goes back as it came."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode("ascii")


def values_json_bytes(shape: tuple[int, ...], encoding_format: str) -> int:
    """The most bytes a float32 array of `shape` takes as the responses' `embedding`: nested lists of JSON numbers
    (`FLOAT_JSON_BYTES` each at most, with the commas and brackets), or a base64 string (exact)."""
    if encoding_format == "base64":
        return 2 + 4 * math.ceil(4 * math.prod(shape) / 3)
    size = FLOAT_JSON_BYTES
    for count in reversed(shape):
        size = 2 + count * size + max(count - 1, 0)
    return size


def text_json_bytes(text: str) -> int:
    """The most bytes `text`'s characters take inside JSON strings, whole or cut into pieces (its words): UTF-8 and
    JSON's escapes, or `ASCII_ESCAPED_CHAR_BYTES` a character where it holds a lone surrogate (`compact_json`)."""
    try:
        utf8 = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return ASCII_ESCAPED_CHAR_BYTES * len(text)
    return utf8 + sum(5 if char < " " else 1 for char in JSON_ESCAPED.findall(text))


def response_bytes(request: EmbeddingsRequest, width: int, num_layers: int, per_word: bool, model_name: str) -> int:
    """An upper bound of the bytes of the response to `request`, from what it asks for, before any model work: the
    envelope (`model_name`, `usage`), and per input its fixed fields and its values (`values_json_bytes`: a `width`
    vector on OpenAI's route; on the per-word route (`per_word`) (layers, words, width), `num_layers` layers for
    "all", or (words, width) for one layer or a mix), and on the per-word route its `words` (at most their text's
    bytes, `text_json_bytes`, 3 bytes each for quotes and comma) and `offsets` (`[start,end]`, at most as many
    digits as the text's length each)."""
    usage = {"prompt_tokens": request.word_count, "total_tokens": request.word_count}
    size = len(compact_json({"object": "list", "data": [], "model": model_name, "usage": usage}))
    size += len(request.texts) - 1  # the commas between the inputs
    if not per_word:
        item = len(compact_json({"object": "embedding", "index": 0, "embedding": 0})) - 2  # less the two 0s
        vector = values_json_bytes((width,), request.encoding_format)
        return size + sum(item + len(str(index)) + vector for index in range(len(request.texts)))
    fields = {"object": "word_embeddings", "index": 0, "words": 0, "offsets": 0, "shape": 0, "embedding": 0}
    item = len(compact_json(fields)) - 5  # less the five 0s
    if request.layers == "all":
        layers = num_layers
    else:  # a list of indices keeps its axis; "top", "average" and a mix have none
        layers = len(request.layers) if isinstance(request.layers, tuple) else None
    for index, (text, words) in enumerate(zip(request.texts, request.words, strict=True)):
        shape = (len(words), width) if layers is None else (layers, len(words), width)
        digits = len(str(len(text)))
        words_json = 1 + 3 * len(words) + text_json_bytes(text)  # brackets; quotes and a comma each, one less
        offsets_json = 1 + (4 + 2 * digits) * len(words)  # brackets; "[start,end]" and a comma each, one less
        size += item + len(str(index)) + words_json + offsets_json + len(compact_json(list(shape)))
        size += values_json_bytes(shape, request.encoding_format)
    return size


def largest_word_request(
    limits: Limits,
    width: int,
    num_layers: int,
    model_name: str,
    split: Splitter,
    layers: str | list[int] = "all",
    encoding_format: str = "float",
) -> dict:
    """The body of the per-word request of the most words that `limits` accept with `layers` and `encoding_format`
    (the response's bound within `limits.response_bytes`, the inputs, the words per input and the body within
    theirs): inputs of `limits.words_per_input` distinct words ("w0 w1 ..."), the last one shorter. For load tests
    and benchmarks (tests/serve/test_serve_memory.py, benchmarks/bench_serve_memory.py)."""
    full = " ".join(f"w{k}" for k in range(limits.words_per_input))
    words = [word for word, _, _ in split(full)]
    offsets = [(start, end) for _, start, end in split(full)]
    shape = {"layers": layers if isinstance(layers, str) else tuple(layers)}

    def request(count: int) -> EmbeddingsRequest:
        inputs, rest = divmod(count, limits.words_per_input)
        last = [rest] if rest else []  # the last input's number of words, where it is shorter
        texts = [full] * inputs + [" ".join(words[:size]) for size in last]
        inputs_words = [words] * inputs + [words[:size] for size in last]
        inputs_offsets = [offsets] * inputs + [offsets[:size] for size in last]
        return EmbeddingsRequest(texts, inputs_words, inputs_offsets, encoding_format, None, **shape)

    def document(count: int) -> dict:
        return {"input": request(count).texts, "encoding_format": encoding_format, "layers": layers}

    def accepted(count: int) -> bool:
        asked = request(count)
        return (
            len(asked.texts) <= limits.inputs
            and len(json.dumps(document(count))) <= limits.body_bytes
            and response_bytes(asked, width, num_layers, True, model_name) <= limits.response_bytes
        )

    if not accepted(1):
        raise ValueError(f"no per-word request of layers {layers!r} as {encoding_format} fits {limits}")
    low, high = 1, limits.inputs * limits.words_per_input  # accepted(low); the most is at most high
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if accepted(middle) else (low, middle - 1)
    return document(low)


def check_response_size(
    request: EmbeddingsRequest, limits: Limits, width: int, num_layers: int, per_word: bool, model_name: str
) -> None:
    """413 (before any model work) where the response to `request` may weigh more than `limits.response_bytes`
    (`response_bytes`), in one line that says what to ask for instead."""
    size = response_bytes(request, width, num_layers, per_word, model_name)
    if size <= limits.response_bytes:
        return
    smaller = (
        'fewer inputs or words, fewer `layers` ("top", "average") or a `scalar_mix`' if per_word else "fewer inputs"
    )
    base64 = ', or "encoding_format": "base64" (a quarter of the size)' if request.encoding_format == "float" else ""
    raise too_large(
        "input",
        f"the response may weigh up to {size} bytes, over the limit of {limits.response_bytes} "
        f"(--max-response-bytes): ask for {smaller}{base64}",
    )


def _parse_common(document: dict, limits: Limits, split: Splitter) -> EmbeddingsRequest:
    if "input" not in document:
        raise bad_field("input", "required: a string or a list of strings")
    texts = _parse_input(document["input"], limits)
    model = document.get("model")
    if model is not None and not isinstance(model, str):
        raise bad_field("model", f"a string, got {_kind(model)}")
    encoding_format = document.get("encoding_format", "float")
    if encoding_format not in ENCODING_FORMATS or not isinstance(encoding_format, str):
        raise bad_field("encoding_format", f"one of {', '.join(map(repr, ENCODING_FORMATS))}, got {encoding_format!r}")
    words, offsets = [], []
    for index, text in enumerate(texts):
        split_text = split(text)
        param = _input_param(document["input"], index)
        if not split_text:
            raise bad_field(param, "holds no words (only spaces or control characters)")
        if len(split_text) > limits.words_per_input:
            raise too_large(
                param, f"{len(split_text)} words, over the limit of {limits.words_per_input} per input (--max-words)"
            )
        words.append([word for word, _, _ in split_text])
        offsets.append([(start, end) for _, start, end in split_text])
    return EmbeddingsRequest(texts, words, offsets, encoding_format, model)


def _parse_input(value: Any, limits: Limits) -> list[str]:
    if isinstance(value, str):
        texts = [value]
    elif isinstance(value, list):
        if not value:
            raise bad_field("input", "an empty list; give at least one string")
        if len(value) > limits.inputs:
            raise too_large("input", f"{len(value)} inputs, over the limit of {limits.inputs} (--max-inputs)")
        texts = value
    else:
        raise bad_field("input", f"a string or a list of strings, got {_kind(value)}")
    for index, text in enumerate(texts):
        param = _input_param(value, index)
        if not isinstance(text, str):
            token_ids = isinstance(text, int) or isinstance(text, list) and all(isinstance(i, int) for i in text)
            why = "; token ids are not accepted (ELMo reads characters)" if token_ids else ""
            raise bad_field(param, f"a string, got {_kind(text)}{why}")
        if not text:
            raise bad_field(param, "an empty string")
    return texts


def _input_param(value: Any, index: int) -> str:
    return "input" if isinstance(value, str) else f"input[{index}]"


def _parse_layers(value: Any, num_layers: int) -> tuple[int, ...] | str:
    if isinstance(value, str) and value in LAYER_NAMES:
        return value
    if not isinstance(value, list) or not value:
        raise bad_field(
            "layers", f"one of {', '.join(map(repr, LAYER_NAMES))} or a list of layer indices, got {value!r:.60}"
        )
    for index in value:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < num_layers:
            raise bad_field("layers", f"layer indices from 0 to {num_layers - 1}, got {index!r:.40}")
    if len(set(value)) != len(value):
        raise bad_field("layers", f"distinct layer indices, got {value!r:.60}")
    return tuple(value)


def _parse_scalar_mix(value: Any, num_layers: int) -> ScalarMix:
    if not isinstance(value, dict) or set(value) - {"weights", "gamma"}:
        raise bad_field("scalar_mix", 'an object {"weights": [numbers], "gamma": number}')
    weights = value.get("weights")
    if not isinstance(weights, list) or len(weights) != num_layers or not all(map(_is_number, weights)):
        raise bad_field(
            "scalar_mix.weights", f"{num_layers} finite numbers (one per layer) {FLOAT32_RANGE}, got {weights!r:.60}"
        )
    gamma = value.get("gamma", 1.0)
    if not _is_number(gamma):
        raise bad_field("scalar_mix.gamma", f"a finite number {FLOAT32_RANGE}, got {gamma!r:.40}")
    return ScalarMix(tuple(float(weight) for weight in weights), float(gamma))


FLOAT32_RANGE = "within float32's range (at most 3.4e38 in size)"


def _is_number(value: Any) -> bool:
    """A JSON number the model's float32 holds: not a boolean, not NaN or infinite (JSON's `NaN`, `Infinity`, or a
    number too large for a double), not beyond float32's largest (an overflow to infinity there)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value) and abs(value) <= FLOAT32_MAX
    except OverflowError:  # an integer too large for a float
        return False


def _refuse_unknown(document: dict, known: frozenset[str]) -> None:
    unknown = sorted(set(document) - known)
    if unknown:
        raise bad_field(unknown[0], f"unknown field; the fields are {', '.join(sorted(known))}")


def _kind(value: Any) -> str:
    return "null" if value is None else f"{type(value).__name__} {value!r:.40}"
