"""What the Triton tests need: `require_interpreted_triton()` at the top of a test module skips it (with the reason)
where Triton is not installed or `TRITON_INTERPRET=1` is not set, and fails it instead when `ELMO_REQUIRE_TRITON=1`
(the CI job that installs Triton sets both)."""

import importlib.util
import os

import pytest

from modeling_elmo.foundation.errors import extra_install_hint


def require_interpreted_triton() -> None:
    if importlib.util.find_spec("triton") is None:
        reason = f"Triton is not installed ({extra_install_hint('gpu')})"
    elif os.environ.get("TRITON_INTERPRET") != "1":
        reason = "TRITON_INTERPRET=1 is not set (the kernels run on a CPU only when Triton interprets them)"
    else:
        return
    if os.environ.get("ELMO_REQUIRE_TRITON") == "1":
        pytest.fail(f"ELMO_REQUIRE_TRITON=1, but {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
