"""The tiers' REQUIRE variables: `ELMO_REQUIRE_INTEGRATION=1` fails every skip of an `integration` test (and only
those), in a pytest run of its own (pytester, in this process); `ELMO_REQUIRE_SCALE_OUT=1` fails Spark's tests where
Java is missing."""

import importlib.util

import pytest
import scale_out_checks

SKIPPING = """
import pytest


@pytest.mark.integration
def test_skipped_in_the_test():
    pytest.skip("no private mount namespace here")


@pytest.mark.integration
@pytest.mark.skipif(True, reason="Triton is not installed")
def test_skipped_by_a_marker():
    pass


def test_skipped_outside_the_tier():
    pytest.skip("needs a GPU")


@pytest.mark.integration
def test_passing():
    pass
"""


def run_skipping(pytester: pytest.Pytester) -> pytest.RunResult:
    pytester.makeini("[pytest]\nmarkers =\n    integration: the tier under test\n")
    pytester.makepyfile(SKIPPING)
    return pytester.runpytest("-p", "require_tiers", "-rA")


def test_without_the_variable_skips_stay_skips(pytester, monkeypatch):
    monkeypatch.delenv("ELMO_REQUIRE_INTEGRATION", raising=False)
    run_skipping(pytester).assert_outcomes(passed=1, skipped=3)


def test_the_variable_fails_every_skip_of_its_tier_and_names_the_reason(pytester, monkeypatch):
    monkeypatch.setenv("ELMO_REQUIRE_INTEGRATION", "1")
    result = run_skipping(pytester)
    result.assert_outcomes(passed=1, failed=1, errors=1, skipped=1)  # set-up's skip: an error
    result.stdout.fnmatch_lines_random(
        [
            "*ELMO_REQUIRE_INTEGRATION=1, but this integration test was skipped: no private mount namespace here",
            "*ELMO_REQUIRE_INTEGRATION=1, but this integration test was skipped: Triton is not installed",
            "SKIPPED*needs a GPU",
        ]
    )


def test_spark_without_java_fails_where_scale_out_is_required(monkeypatch):
    installed = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "pyspark" else installed(name))
    monkeypatch.setattr(scale_out_checks.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.delenv("ELMO_REQUIRE_SCALE_OUT", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Spark needs Java"):
        scale_out_checks.require_engine("pyspark")
    monkeypatch.setenv("ELMO_REQUIRE_SCALE_OUT", "1")
    with pytest.raises(pytest.fail.Exception, match="Spark needs Java.*ELMO_REQUIRE_SCALE_OUT=1"):
        scale_out_checks.require_engine("pyspark")
