"""Bad input to `modeling_elmo.allennlp`: one `ConfigurationError` whose one-line message names the file, argument or
shape, never a bare KeyError/AttributeError from inside."""

import functools
import http.server
import threading

import pytest
import torch

from modeling_elmo.allennlp import ConfigurationError, Elmo, ElmoEmbedder, _ElmoBiLm, batch_to_ids


@pytest.fixture(scope="module")
def files(fixture_dir):
    return str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def elmo(files):
    return Elmo(*files, 1, dropout=0.0, stateful=False)


def raises(pattern: str):
    """`pytest.raises(ConfigurationError)` whose message matches `pattern` and is one line."""

    class _Check:
        def __enter__(self):
            self.context = pytest.raises(ConfigurationError, match=pattern)
            self.info = self.context.__enter__()

        def __exit__(self, *exc):
            suppressed = self.context.__exit__(*exc)
            assert "\n" not in str(self.info.value)
            return suppressed

    return _Check()


def test_missing_files(files, tmp_path):
    with raises(f"Options file not found: {tmp_path}/missing.json"):
        Elmo(str(tmp_path / "missing.json"), files[1], 1)
    with raises(f"Weights file not found: {tmp_path}/missing.hdf5"):
        Elmo(files[0], str(tmp_path / "missing.hdf5"), 1)


def test_corrupt_files(files, tmp_path):
    (tmp_path / "options.json").write_text('{"lstm": ')
    with raises(f"{tmp_path}/options.json: not valid JSON"):
        _ElmoBiLm(str(tmp_path / "options.json"), files[1])
    (tmp_path / "weights.hdf5").write_bytes(b"\x89HDF\r\n" + b"\0" * 100)
    with raises(f"{tmp_path}/weights.hdf5: not a readable HDF5 file"):
        _ElmoBiLm(files[0], str(tmp_path / "weights.hdf5"))
    (tmp_path / "keys.json").write_text('{"lstm": {"dim": 64}, "char_cnn": {}}')
    with raises(f"{tmp_path}/keys.json: missing key 'lstm.projection_dim'"):
        _ElmoBiLm(str(tmp_path / "keys.json"), files[1])


def test_converted_model_sources(files, tmp_path):
    with raises("weight_file is None, so options_file must be a converted model folder"):
        Elmo(files[0], None, 1)
    with raises(f"{tmp_path}/nothing: not a converted ELMo model folder or Hub id"):
        Elmo(str(tmp_path / "nothing"), None, 1)
    with raises("options_file must be a path, URL or model folder, got a int"):
        Elmo(3, files[1], 1)


@pytest.mark.parametrize(
    ("inputs", "pattern"),
    [
        (torch.zeros(2, 3, 50), r"inputs must hold integer character ids \(torch.long\), got dtype torch.float32"),
        (torch.zeros(2, 50, dtype=torch.long), r"inputs must be character ids shaped \(batch_size, timesteps, 50\)"),
        (
            torch.zeros(2, 3, 49, dtype=torch.long),
            r"inputs must have shape \(batch_size, timesteps, 50\), got \(2, 3, 49\)",
        ),
        (torch.full((1, 2, 50), 300), r"inputs must hold ids in \[0, 261\]"),
        ([[1] * 50], "inputs must be character ids shaped"),
    ],
)
def test_bad_character_ids(elmo, inputs, pattern):
    with raises(pattern):
        elmo(inputs)


def test_rows_must_be_right_padded(elmo):
    ids = batch_to_ids([["a", "b", "c"], ["d"]])
    ids[1, 2] = ids[0, 0]
    with raises("inputs row 1 has a padded word before a real one"):
        elmo(ids)


def test_word_inputs_must_match_the_characters(files):
    elmo = Elmo(*files, 1, vocab_to_cache=["@@PADDING@@", "a", "b"], stateful=False)
    ids = batch_to_ids([["a", "b"], ["b"]])
    with raises(r"word_inputs has shape \(2, 3\), but inputs \(character ids\) have shape \(2, 2, 50\)"):
        elmo(ids, torch.tensor([[1, 2, 0], [2, 0, 0]]))
    with raises("word_inputs must be a torch.Tensor of integer word ids"):
        elmo(ids, torch.zeros(2, 2))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (dict(num_output_representations=-1), "num_output_representations must be an int >= 0, got -1"),
        (dict(num_output_representations="2"), "num_output_representations must be an int >= 0, got '2'"),
        (
            dict(num_output_representations=1, scalar_mix_parameters=[1.0, 2.0]),
            "scalar_mix_parameters has 2 values, but the biLM has 3 layers",
        ),
        (
            dict(num_output_representations=1, scalar_mix_parameters="abc"),
            "scalar_mix_parameters must be a list of numbers",
        ),
        (dict(num_output_representations=1, dropout=1.5), r"dropout must be a probability in \[0, 1\], got 1.5"),
    ],
)
def test_bad_arguments(files, kwargs, pattern):
    with raises(pattern):
        Elmo(*files, **kwargs)


def test_module_excludes_files(files):
    with raises("Don't provide options_file or weight_file with module"):
        Elmo(files[0], None, 1, module=_ElmoBiLm(*files))


def test_reset_states_mask_of_the_wrong_size(files):
    bilm = _ElmoBiLm(*files)
    with raises("there are no LSTM states yet"):
        bilm.reset_states(torch.tensor([True]))
    bilm(batch_to_ids([["a"], ["b"]]))
    with raises(r"mask must have shape \(2,\), the batch size of the stored states, got \(3,\)"):
        bilm.reset_states(torch.tensor([True, False, True]))


def test_embedder_arguments(files, tmp_path):
    with raises("cuda_device=99, but there is no such CUDA device here"):
        ElmoEmbedder(*files, cuda_device=99)
    embedder = ElmoEmbedder(*files)
    (tmp_path / "in.txt").write_text("a b\n")
    with raises("output_format must be one of all, top, average: got 'bogus'"):
        embedder.embed_file(str(tmp_path / "in.txt"), tmp_path / "out.hdf5", output_format="bogus")
    with raises("batch_size must be an int >= 1, got 0"):
        list(embedder.embed_sentences([["a"]], batch_size=0))
    with raises(f"{tmp_path}/missing.txt: cannot read the input file"):
        embedder.embed_file(str(tmp_path / "missing.txt"), tmp_path / "out.hdf5")
    assert not (tmp_path / "out.hdf5").exists()


def test_files_from_urls_are_downloaded_once(fixture_dir, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "is_offline_mode", lambda: False)
    monkeypatch.setattr(constants, "HF_HOME", str(tmp_path / "hf"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(fixture_dir))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        from_urls = _ElmoBiLm(f"{base}/options.json", f"{base}/lm_weights.hdf5", stateful=False)
        with raises(f"Could not download {base}/missing.hdf5"):
            _ElmoBiLm(f"{base}/options.json", f"{base}/missing.hdf5")
    finally:
        server.shutdown()
        server.server_close()
    cached = sorted(path.name for path in (tmp_path / "hf").rglob("*.*"))
    assert cached == ["lm_weights.hdf5", "options.json"]
    again = _ElmoBiLm(f"{base}/options.json", f"{base}/lm_weights.hdf5", stateful=False)  # server gone: the cache
    local = _ElmoBiLm(str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5"), stateful=False)
    ids = batch_to_ids([["The", "bank"]])
    for a, b, c in zip(
        from_urls(ids)["activations"], again(ids)["activations"], local(ids)["activations"], strict=True
    ):
        assert torch.equal(a, c) and torch.equal(b, c)


def test_converted_folder_gives_the_same_numbers(files, converted_fixture):
    ids = batch_to_ids([["The", "bank", "closed"], ["River"]])
    original = Elmo(*files, 2, dropout=0.0)
    converted = Elmo(str(converted_fixture), None, 2, dropout=0.0)
    for _ in range(2):  # stateful: the second call continues from the first
        a, b = original(ids), converted(ids)
        for x, y in zip(a["elmo_representations"], b["elmo_representations"], strict=True):
            assert torch.equal(x, y)
