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
