"""`elmo serve`'s command line in-process (no torch): the settings each flag gives and the one-line refusals."""

import pytest

from modeling_elmo.serve.arguments import parse_command_line


def test_quantization_reaches_the_settings():
    assert parse_command_line(["some/model"])[0].quantization is None
    assert parse_command_line(["some/model", "--quantization", "none"])[0].quantization is None
    assert parse_command_line(["some/model", "--quantization", "int8"])[0].quantization == "int8"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["some/model", "--quantization", "int4"], "--quantization: invalid choice: 'int4'"),
        (["some/model", "--quantization", "int8", "--device", "cuda"], "--quantization int8 runs on the CPU"),
    ],
)
def test_quantization_refusals_are_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as raised:
        parse_command_line(argv)
    assert raised.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1


def test_the_size_limits_and_their_defaults():
    limits = parse_command_line(["some/model"])[0].limits
    assert (limits.inputs, limits.words_per_input, limits.body_bytes) == (2048, 512, 16 * 2**20)
    assert limits.response_bytes == 64 * 2**20
    limits = parse_command_line(["some/model", "--max-inputs", "100", "--max-words", "50"])[0].limits
    assert limits.body_bytes == 100 * 50 * 16  # the body limit follows
    argv = ["some/model", "--max-body-bytes", "1000", "--max-response-bytes", "5000"]
    limits = parse_command_line(argv)[0].limits
    assert (limits.body_bytes, limits.response_bytes) == (1000, 5000)
