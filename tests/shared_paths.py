"""Where the repository, the package under test and `../shared` (reference fixtures, data) are, for the tests and
their helpers. A module of its own, not `conftest`: a subfolder's conftest.py would shadow the name `conftest` for
plain imports."""

import importlib.util
import os
from pathlib import Path

import pytest

# the checkout the tests run from: docs/, examples/, conversion/, benchmarks/, pyproject.toml, .ci/
REPO_ROOT = Path(__file__).resolve().parent.parent
# the `modeling_elmo` the tests import: the source tree in an editable install, site-packages with the wheel (CI's
# wheel job runs the tests from a checkout without modeling_elmo/), so never REPO_ROOT / "modeling_elmo"
PACKAGE_DIR = Path(importlib.util.find_spec("modeling_elmo").origin).parent


def _shared_dir() -> Path:
    return Path(os.environ.get("ELMO_SHARED_DIR", REPO_ROOT.parent / "shared"))


def require_shared(relative: str) -> Path:
    """Path under ../shared; fail loudly in CI, skip elsewhere, when it is missing."""
    path = _shared_dir() / relative
    if not path.exists():
        message = f"{path} is missing: set ELMO_SHARED_DIR or place ../shared beside the repo."
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path
