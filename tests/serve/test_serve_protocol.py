"""The request checks in-process: what each route accepts, and each refusal's status, field and one-line message."""

import json

import pytest

from modeling_elmo.serve.protocol import (
    ApiError,
    Limits,
    ScalarMix,
    check_response_size,
    largest_word_request,
    parse_body,
    parse_openai_request,
    parse_word_request,
    response_bytes,
    values_json_bytes,
)
from modeling_elmo.word_splitter import split_words

LIMITS = Limits(body_bytes=1000, inputs=3, words_per_input=5)


def openai(document: dict):
    return parse_openai_request(document, LIMITS, split_words)


def words(document: dict):
    return parse_word_request(document, LIMITS, split_words, num_layers=3)


def refusal(parse, document) -> ApiError:
    with pytest.raises(ApiError) as raised:
        parse(document)
    error = raised.value
    assert error.message.startswith(f"{error.param}: ") and "\n" not in error.message
    assert error.body() == {
        "error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}
    }
    return error


def test_a_string_and_a_list_of_strings():
    request = openai({"input": "River bank.", "model": "m", "user": "u"})
    assert request.texts == ["River bank."] and request.words == [["River", "bank", "."]]
    assert request.offsets == [[(0, 5), (6, 10), (10, 11)]] and request.word_count == 3
    assert request.encoding_format == "float" and request.model == "m"
    request = openai({"input": ["a b", "c"], "encoding_format": "base64", "dimensions": None})
    assert request.words == [["a", "b"], ["c"]] and request.encoding_format == "base64"


def test_dimensions_only_the_models_width():
    assert parse_openai_request({"input": "a", "dimensions": 8}, LIMITS, split_words, width=8).texts == ["a"]
    for dimensions in (7, 8.0, "8", True):
        document = {"input": "a", "dimensions": dimensions}
        error = refusal(lambda document: parse_openai_request(document, LIMITS, split_words, width=8), document)
        assert error.param == "dimensions" and "only 8 (the model's width)" in error.message


@pytest.mark.parametrize(
    ("document", "status", "param"),
    [
        ({}, 400, "input"),
        ({"input": 1}, 400, "input"),
        ({"input": True}, 400, "input"),
        ({"input": {"text": "a"}}, 400, "input"),
        ({"input": []}, 400, "input"),
        ({"input": ""}, 400, "input"),
        ({"input": "\u200b \t"}, 400, "input"),
        ({"input": ["a", None]}, 400, "input[1]"),
        ({"input": [[7, 8]]}, 400, "input[0]"),
        ({"input": ["a", ""]}, 400, "input[1]"),
        ({"input": "a", "model": ["m"]}, 400, "model"),
        ({"input": "a", "encoding_format": "float16"}, 400, "encoding_format"),
        ({"input": "a", "encoding_format": ["float"]}, 400, "encoding_format"),
        ({"input": "a", "dimensions": 8}, 400, "dimensions"),
        ({"input": "a", "user": 1}, 400, "user"),
        ({"input": "a", "layers": "top"}, 400, "layers"),
        ({"input": ["a", "b", "c", "d"]}, 413, "input"),
        ({"input": "a b c d e f"}, 413, "input"),
        ({"input": ["a", "a b c d e f"]}, 413, "input[1]"),
    ],
)
def test_openai_refusals(document, status, param):
    error = refusal(openai, document)
    assert (error.status, error.param) == (status, param)


def test_token_ids_are_refused_with_the_reason():
    assert "token ids are not accepted" in refusal(openai, {"input": [[1, 2]]}).message


def test_the_body():
    assert parse_body(b'{"input": "a"}', LIMITS) == {"input": "a"}
    assert refusal(lambda body: parse_body(body, LIMITS), b"x" * 1001).status == 413
    for body in (b"{", b"[]", b'"text"', b"\xff"):
        assert refusal(lambda body: parse_body(body, LIMITS), body).param == "body"


def test_word_requests_layers_and_mix():
    assert words({"input": "a"}).layers == "all"
    assert words({"input": "a", "layers": "average"}).layers == "average"
    assert words({"input": "a", "layers": [2, 0]}).layers == (2, 0)
    mixed = words({"input": "a", "scalar_mix": {"weights": [1, 0, -1.5]}})
    assert mixed.scalar_mix == ScalarMix((1.0, 0.0, -1.5), 1.0) and mixed.layers is None
    assert words({"input": "a", "scalar_mix": {"weights": [1, 2, 3], "gamma": 2}}).scalar_mix.gamma == 2.0


@pytest.mark.parametrize(
    ("document", "param"),
    [
        ({"input": "a", "layers": []}, "layers"),
        ({"input": "a", "layers": [3]}, "layers"),
        ({"input": "a", "layers": [-1]}, "layers"),
        ({"input": "a", "layers": [True]}, "layers"),
        ({"input": "a", "layers": [0, 0]}, "layers"),
        ({"input": "a", "layers": "bottom"}, "layers"),
        ({"input": "a", "layers": 1}, "layers"),
        ({"input": "a", "layers": "all", "scalar_mix": {"weights": [1, 1, 1]}}, "layers"),
        ({"input": "a", "scalar_mix": [1, 1, 1]}, "scalar_mix"),
        ({"input": "a", "scalar_mix": {"weights": [1, 1, 1], "beta": 1}}, "scalar_mix"),
        ({"input": "a", "scalar_mix": {"weights": [1, 1]}}, "scalar_mix.weights"),
        ({"input": "a", "scalar_mix": {"weights": [1, "1", 1]}}, "scalar_mix.weights"),
        ({"input": "a", "scalar_mix": {"weights": [1, float("nan"), 1]}}, "scalar_mix.weights"),
        ({"input": "a", "scalar_mix": {"weights": [1, 1, 1], "gamma": None}}, "scalar_mix.gamma"),
        ({"input": "a", "scalar_mix": {"weights": [1, 1, 1], "gamma": 1e39}}, "scalar_mix.gamma"),
        ({"input": "a", "scalar_mix": {"weights": [1, 1, 1], "gamma": float("inf")}}, "scalar_mix.gamma"),
        ({"input": "a", "scalar_mix": {"weights": [1, -1e39, 1]}}, "scalar_mix.weights"),
        ({"input": "a", "dimensions": 3}, "dimensions"),
        ({"input": ""}, "input"),
    ],
)
def test_word_refusals(document, param):
    error = refusal(words, document)
    assert error.status == 400 and error.param == param


def test_errors_serialise_as_json():
    error = refusal(openai, {"input": 3})
    assert json.loads(json.dumps(error.body()))["error"]["type"] == "invalid_request_error"


def test_the_default_limits_and_the_body_limit_follows():
    limits = Limits()
    assert (limits.inputs, limits.words_per_input, limits.response_bytes) == (2048, 512, 64 * 2**20)
    assert limits.body_bytes == 2048 * 512 * 16 == 16 * 2**20
    assert Limits(inputs=10, words_per_input=20).body_bytes == 10 * 20 * 16
    assert Limits(body_bytes=99, inputs=10).body_bytes == 99


def test_the_response_estimate_grows_with_what_is_asked():
    def size(request, per_word=True):
        return response_bytes(request, 8, 3, per_word, "model")

    two = size(words({"input": ["a b", "c d e"]}))
    assert size(words({"input": "a b c d e"})) < two < size(words({"input": ["a b", "c d e f"]}))
    every_layer = size(words({"input": "a b"}))
    numbers = values_json_bytes((3, 2, 8), "float")
    assert numbers == 3 * (2 * (8 * 23 + 7 + 2) + 1 + 2) + 2 + 2  # 23 bytes a number at most; commas, brackets
    assert numbers < every_layer < numbers + 300  # the envelope, the fields, the words and offsets
    assert size(words({"input": "a b", "layers": [0, 2]})) < every_layer
    for one in ({"layers": "top"}, {"layers": "average"}, {"scalar_mix": {"weights": [0, 0, 0]}}):
        assert size(words({"input": "a b", **one})) < size(words({"input": "a b", "layers": [2]}))
    encoded = size(words({"input": "a b", "encoding_format": "base64"}))
    assert 2 * 3 * 8 * 4 * 4 // 3 < encoded < every_layer / 3
    assert size(openai({"input": ["a b", "c d e"]}), per_word=False) < size(words({"input": ["a b", "c d e"]}))
    assert response_bytes(words({"input": "a"}), 8, 3, True, "a-longer-name") == size(words({"input": "a"})) + 8


def test_a_response_over_the_budget_is_413_saying_what_to_do():
    request = words({"input": "a b c"})
    budget = response_bytes(request, 8, 3, True, "model")
    check_response_size(request, Limits(response_bytes=budget), 8, 3, True, "model")
    over = Limits(response_bytes=budget - 1)
    error = refusal(lambda request: check_response_size(request, over, 8, 3, True, "model"), request)
    assert (error.status, error.param, error.code) == (413, "input", "too_large")
    for named in (f"{budget} bytes", f"limit of {budget - 1}", "--max-response-bytes", "fewer inputs", "layers"):
        assert named in error.message
    assert "scalar_mix" in error.message and "base64" in error.message
    encoded = words({"input": "a b c", "encoding_format": "base64"})
    few = Limits(response_bytes=10)
    error = refusal(lambda request: check_response_size(request, few, 8, 3, True, "model"), encoded)
    assert "base64" not in error.message  # already asked for
    sentences = openai({"input": "a b c"})
    error = refusal(lambda request: check_response_size(request, few, 8, 3, False, "model"), sentences)
    assert "layers" not in error.message and "fewer inputs" in error.message


@pytest.mark.parametrize(
    ("limits", "width", "binds"),
    [
        (Limits(), 32, "response"),  # the fixture at the defaults: the budget binds
        (Limits(), 1024, "response"),  # 'original'
        (Limits(inputs=3, words_per_input=5), 2, "inputs"),
        (Limits(body_bytes=120, inputs=30, words_per_input=5), 2, "body"),
    ],
)
@pytest.mark.parametrize(("layers", "encoding_format"), [("all", "float"), ("top", "base64"), ([0, 2], "float")])
def test_the_largest_word_request_is_the_most_words_the_limits_accept(limits, width, binds, layers, encoding_format):
    def accepted(document: dict) -> bool:
        try:
            parse_body(json.dumps(document).encode(), limits)
            request = parse_word_request(document, limits, split_words, 3)
            check_response_size(request, limits, width, 3, True, "model")
        except ApiError as error:
            assert error.status == 413 and error.param in ("input", "body"), error
            assert (error.param == "body") == (binds == "body") and ("bytes" in error.message) != (binds == "inputs")
            return False
        return True

    document = largest_word_request(limits, width, 3, "model", split_words, layers, encoding_format)
    assert document["layers"] == layers and document["encoding_format"] == encoding_format
    assert accepted(document)
    texts = document["input"]
    last_words = len(split_words(texts[-1]))
    one_more = texts[:-1] + [f"{texts[-1]} w"] if last_words < limits.words_per_input else [*texts, "w"]
    assert not accepted({**document, "input": one_more})
