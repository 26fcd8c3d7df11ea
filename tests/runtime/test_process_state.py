"""Every public API leaves the caller's process as it found it (issue 41, item 4): torch's thread counts and the
Python threads alive (issue 46: no pool outlives the call), the environment, grad and inference mode, the default
dtype, torch's backend and precision flags, the random states, and Transformers' and the Hub's progress bars and
verbosity, each recorded before a first and a later call (loading included) and compared after."""

import os
import random
import threading

import numpy as np
import pytest
import torch
from huggingface_hub.utils import are_progress_bars_disabled
from python_threads import caller_threads
from transformers.utils import logging as hf_logging

from modeling_elmo.allennlp import Elmo, ElmoEmbedder, batch_to_ids
from modeling_elmo.elmoformanylangs import Embedder
from modeling_elmo.embed import ElmoBatchEmbedder, cli
from modeling_elmo.simple_elmo import ElmoModel as SimpleElmoModel

SENTENCES = [["the", "bank", "closed", "."], ["river", "boats"], ["a"]]
CALLER_THREADS = 3  # not a count any API picks by default (ElmoBatchEmbedder's is 1, the tuner's 1 and all)


def _backend_flags() -> dict[str, object]:
    """torch's precision and backend flags (the per-operator `fp32_precision` API: reading the old `allow_tf32`
    flags after it was used raises)."""
    backends = torch.backends
    return {
        "matmul precision": torch.get_float32_matmul_precision(),
        "cuda matmul fp32": backends.cuda.matmul.fp32_precision,
        "cudnn conv fp32": backends.cudnn.conv.fp32_precision,
        "cudnn": (backends.cudnn.enabled, backends.cudnn.benchmark, backends.cudnn.deterministic),
        "mkldnn": (backends.mkldnn.enabled, backends.mkldnn.matmul.fp32_precision),
        "deterministic algorithms": torch.are_deterministic_algorithms_enabled(),
    }


def process_state() -> dict[str, object]:
    """What a library call must not change in its caller's process."""
    numpy_random = np.random.get_state()
    return {
        "threads": torch.get_num_threads(),
        "interop threads": torch.get_num_interop_threads(),
        "python threads": sorted((thread.name, thread.ident) for thread in threading.enumerate()),
        "environment": dict(os.environ),
        "grad mode": torch.is_grad_enabled(),
        "inference mode": torch.is_inference_mode_enabled(),
        "default dtype": torch.get_default_dtype(),
        **_backend_flags(),
        "torch random": torch.get_rng_state().numpy().tobytes(),
        "numpy random": (numpy_random[0], numpy_random[1].tobytes(), *numpy_random[2:]),
        "python random": random.getstate(),
        "transformers progress bars": hf_logging.is_progress_bar_enabled(),
        "hub progress bars disabled": are_progress_bars_disabled(),
        "transformers verbosity": hf_logging.get_verbosity(),
    }


@pytest.fixture
def caller_count():
    """The caller runs at `CALLER_THREADS` threads (given back to the suite's count after)."""
    with caller_threads(CALLER_THREADS) as count:
        yield count


def _batch_embedder(folder):
    embedder = ElmoBatchEmbedder(folder, "all", batch_size=2)
    return lambda: embedder({"id": [0, 1, 2], "words": SENTENCES})


def _allennlp_embedder(folder):
    embedder = ElmoEmbedder(str(folder), None)
    return lambda: embedder.embed_batch(SENTENCES)


def _allennlp_elmo(folder):
    elmo = Elmo(str(folder), None, 2, dropout=0.0).eval()
    return lambda: elmo(batch_to_ids(SENTENCES))


def _efml_embedder(folder):
    embedder = Embedder(str(folder), batch_size=2)
    return lambda: embedder.sents2elmo(SENTENCES)


def _simple_elmo(folder):
    model = SimpleElmoModel()
    model.load(str(folder), max_batch_size=2)
    return lambda: (model.get_elmo_vectors(SENTENCES), model.get_elmo_vector_average(SENTENCES))


def _elmo_embed(folder, tmp_path, entry: str):
    """`elmo-embed` called in-process: `main(argv)` (HDF5) or `run(args)` (Parquet), a new output each call."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(words) for words in SENTENCES) + "\n", encoding="utf-8")
    runs = iter(range(100))

    def call():
        argv = [str(corpus), "", "--model", str(folder), "--batch-size", "2"]
        if entry == "main":
            argv[1] = str(tmp_path / f"out-{next(runs)}.hdf5")
            assert cli.main([*argv, "--no-progress"]) == 0
        else:
            argv[1] = str(tmp_path / f"out-{next(runs)}")
            assert cli.run(cli.build_parser().parse_args([*argv, "--format", "parquet"]))

    return call


APIS = {
    "ElmoBatchEmbedder": lambda folder, tmp_path: _batch_embedder(folder),
    "allennlp.ElmoEmbedder": lambda folder, tmp_path: _allennlp_embedder(folder),
    "allennlp.Elmo": lambda folder, tmp_path: _allennlp_elmo(folder),
    "elmoformanylangs.Embedder": lambda folder, tmp_path: _efml_embedder(folder),
    "simple_elmo.ElmoModel": lambda folder, tmp_path: _simple_elmo(folder),
    "elmo-embed main(argv)": lambda folder, tmp_path: _elmo_embed(folder, tmp_path, "main"),
    "elmo-embed run(args)": lambda folder, tmp_path: _elmo_embed(folder, tmp_path, "run"),
}


@pytest.mark.parametrize("api", list(APIS))
def test_a_call_leaves_the_process_as_it_found_it(api, converted_fixture, tmp_path, caller_count):
    before = process_state()
    call = APIS[api](converted_fixture, tmp_path)  # loading included
    call()
    assert process_state() == before
    torch.set_num_threads(1)  # a later call finds another count: it gives that one back
    later = process_state()
    call()
    assert process_state() == later


def test_the_thread_count_is_the_api_s_during_the_call_and_the_caller_s_after(
    converted_fixture, caller_count, monkeypatch
):
    """ElmoBatchEmbedder(threads=2) runs its forward passes at 2 threads, then gives the caller's 3 back."""
    seen = []
    embed_batch = cli.embed_batch

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return embed_batch(*args, **kwargs)

    from modeling_elmo.embed import batch_embedder

    monkeypatch.setattr(batch_embedder, "embed_batch", recording)
    ElmoBatchEmbedder(converted_fixture, "top", threads=2, batch_size=2)({"id": [0, 1, 2], "words": SENTENCES})
    assert seen == [2, 2] and torch.get_num_threads() == caller_count
