"""Fixtures of the pretraining tests."""

from pathlib import Path

import pytest
from pretraining_inputs import make_corpus


@pytest.fixture
def corpus(tmp_path) -> dict[str, Path]:
    """A tiny corpus (4 sentences, 30 times, in 2 shards), a held-out file, its vocabulary and options."""
    return make_corpus(tmp_path)
