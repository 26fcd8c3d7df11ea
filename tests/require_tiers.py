"""The suite's tiers and what a CI job that must run a tier in full sets: the default run (`python -m pytest -q`)
deselects the `integration` tier (tests that start another interpreter of torch, run a documented block, kill or
compete with a process, or need minutes: docs/development.md gives the rule), `-m integration` runs it, and
`ELMO_REQUIRE_INTEGRATION=1` turns every skip of one of its tests into a failure that names the variable and the
skip's reason. Loaded by conftest.py as a plugin."""

import os

import pytest

REQUIRED_BY = {"integration": "ELMO_REQUIRE_INTEGRATION"}  # a tier's marker: the variable that forbids its skips


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """A skip of a test of a required tier becomes a failure (an error where set-up or a `skipif` marker skipped)."""
    report = yield
    if not report.skipped or hasattr(report, "wasxfail"):
        return report
    for marker, variable in REQUIRED_BY.items():
        if item.get_closest_marker(marker) is not None and os.environ.get(variable) == "1":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            reason = reason.removeprefix("Skipped: ")
            report.outcome = "failed"
            report.longrepr = f"{variable}=1, but this {marker} test was skipped: {reason}"
    return report
