"""Shared test fixtures. `../shared` (reference fixtures, data) is found beside the repo root or via
`ELMO_SHARED_DIR`; when it is missing, tests that need it fail in CI (`CI` set) and are skipped elsewhere. The tiers
(`integration`, deselected by default) and their REQUIRE variables: `require_tiers`."""

import os
from pathlib import Path

import pytest
from shared_paths import require_shared

pytest_plugins = ["pytester", "require_tiers"]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Before torch is imported: idle OpenMP threads sleep instead of spinning, which keeps the many small per-step
# operations of the LSTM fast when other processes share the CPU.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def fixture_dir() -> Path:
    """The original small biLM and the reference outputs of the original TensorFlow code."""
    return require_shared("fixtures/elmo")


@pytest.fixture(scope="session")
def conll_dir() -> Path:
    """CoNLL-2003 train/dev/test files."""
    return require_shared("data/conll2003")


@pytest.fixture(scope="session")
def converted_fixture(fixture_dir, tmp_path_factory) -> Path:
    """The fixture biLM converted with `elmo-convert` logic into a model folder (once per session)."""
    from modeling_elmo.conversion.convert import convert_checkpoint

    output = tmp_path_factory.mktemp("converted") / "elmo-fixture"
    convert_checkpoint(str(fixture_dir / "options.json"), str(fixture_dir / "lm_weights.hdf5"), output)
    return output


@pytest.fixture
def random_checkpoint(tmp_path):
    """Factory: write a random original-format checkpoint and return (options_path, weights_path)."""
    from modeling_elmo.conversion.testing_utils import OriginalArchitecture, write_random_original_checkpoint

    def make(seed: int = 0, write_projection: bool = True, **architecture):
        return write_random_original_checkpoint(
            tmp_path / f"original-{seed}", OriginalArchitecture(**architecture), seed, write_projection
        )

    return make
