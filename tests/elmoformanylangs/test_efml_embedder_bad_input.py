"""What `modeling_elmo.elmoformanylangs.Embedder` refuses in one line where ELMoForManyLangs goes on silently or
fails deep inside: output layers out of range, strings where token lists are expected, folders in no known format."""

import pytest
from efml_numpy import write_efml_model

from modeling_elmo.elmoformanylangs import Embedder, SentenceInputError
from modeling_elmo.formats.efml import EfmlFormatError


@pytest.fixture(scope="module")
def embedder(tmp_path_factory) -> Embedder:
    return Embedder(write_efml_model(tmp_path_factory.mktemp("efml") / "efml", words=None))


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("output_layer", [-3, 3, 1.0, True, "0", None])
def test_output_layer_out_of_range_is_refused(embedder, output_layer):
    """ELMoForManyLangs returns layer 0 for -3 (numpy indexing) and raises IndexError for 3."""
    with pytest.raises(ValueError) as error:
        embedder.sents2elmo([["мир"]], output_layer=output_layer)
    assert _one_line(error).startswith("output_layer must be -2 (all layers), -1 (their mean) or 0..2")


@pytest.mark.parametrize(
    ("sents", "message"),
    [
        ("мир", "sents must be a list of sentences, each a list of str tokens, got a str (ELMoForManyLangs would"),
        (["привет мир"], "sents[0] is a str ('привет мир'), not a list of tokens: ELMoForManyLangs would split it"),
        ([["мир"], "мир"], "sents[1] is a str ('мир')"),
        ([["мир", 3]], "sents[0][1] must be a str token, got 3."),
        ([{"мир"}], "sents[0] must be a list of str tokens, got a set."),
        (42, "sents must be a list of sentences, each a list of str tokens, got a int."),
    ],
)
def test_strings_and_non_strings_are_refused(embedder, sents, message):
    with pytest.raises(SentenceInputError) as error:
        embedder.sents2elmo(sents)
    assert message in _one_line(error)
    assert isinstance(error.value, ValueError) and isinstance(error.value, TypeError)


@pytest.mark.parametrize("batch_size", [0, -1, 2.0, True])
def test_batch_size_must_be_a_positive_int(embedder, batch_size, tmp_path):
    with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1"):
        Embedder(write_efml_model(tmp_path / "efml", words=None), batch_size=batch_size)
    embedder.batch_size = batch_size  # set later, as EFML code may do: refused at the call
    try:
        with pytest.raises(ValueError, match=r"^batch_size must be an int >= 1"):
            embedder.sents2elmo([["мир"]])
    finally:
        embedder.batch_size = 64


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / "encoder.pkl").unlink(), "encoder.pkl is missing"),
        (lambda d: (d / "config.json").unlink(), "config.json is missing"),
        (lambda d: [(d / name).unlink() for name in ("char.dic", "token_embedder.pkl")], "neither an ELMoForMany"),
    ],
)
def test_a_folder_in_no_known_format_names_the_missing_file(tmp_path, damage, message):
    folder = write_efml_model(tmp_path / "efml", words=None)
    damage(folder)
    with pytest.raises(EfmlFormatError) as error:
        Embedder(str(folder))
    assert message in _one_line(error)


def test_a_missing_folder_and_a_file_are_refused(tmp_path):
    with pytest.raises(EfmlFormatError, match="neither an ELMoForManyLangs model folder"):
        Embedder(str(tmp_path / "nowhere"))
    (tmp_path / "weights.pkl").write_bytes(b"")
    with pytest.raises(EfmlFormatError, match="is a file: model_dir must be a model folder or Hub id"):
        Embedder(str(tmp_path / "weights.pkl"))
