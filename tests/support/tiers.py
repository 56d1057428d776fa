"""The time each tier of the suite takes, printed after a run (tests/README.md): its tests, the time
spent in them (setup, call and teardown, summed over the workers) and the CPU of their processes
(the test's own and that of the processes it started and waited for; a process started through tmux
is not counted).

Under pytest-xdist each worker measures its tests and sends the figure in the test's report; the
process that runs the session adds them up."""

from __future__ import annotations

import os
from collections.abc import Generator
from dataclasses import dataclass

import pytest

CPU = "cpu_s"  # the user property a test's teardown report carries
_START = pytest.StashKey[float]()


@dataclass
class Tier:
    tests: int = 0
    seconds: float = 0.0
    cpu: float = 0.0


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def tier_of(nodeid: str) -> str:
    """`tests/engine/test_x.py::test_y` -> `tests/engine`; a test elsewhere, by its folder."""
    parts = nodeid.split("::")[0].split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts[:-1]) or "."


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None]:
    item.stash[_START] = _cpu()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None]:
    if call.when == "teardown" and _START in item.stash:
        item.user_properties.append((CPU, round(_cpu() - item.stash[_START], 3)))
    yield


class Tiers:
    """The figures of each tier, added up in the process that runs the session."""

    def __init__(self) -> None:
        self.tiers: dict[str, Tier] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = self.tiers.setdefault(tier_of(report.nodeid), Tier())
        tier.seconds += report.duration
        if report.when == "teardown":
            tier.tests += 1
            tier.cpu += sum(float(str(v)) for k, v in report.user_properties if k == CPU)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.tiers:
            return
        terminalreporter.section("time per tier")
        terminalreporter.line(f"{'tier':<16} {'tests':>6} {'in tests':>9} {'CPU':>8}")
        for name, t in sorted(self.tiers.items(), key=lambda item: -item[1].seconds):
            terminalreporter.line(f"{name:<16} {t.tests:>6} {t.seconds:>8.1f}s {t.cpu:>7.1f}s")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # an xdist worker sends its reports to the session
        config.pluginmanager.register(Tiers(), "evolve-tiers")
