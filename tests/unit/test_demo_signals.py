"""evolve_demo/signals.py: what a signal does to the demo in each phase. Signals are sent to this
process itself (os.kill), and its handlers are restored after each test."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from evolve_demo.signals import SIGNALS, DemoSignals, Stopped


@pytest.fixture
def signals() -> Iterator[DemoSignals]:
    kept = {sig: signal.getsignal(sig) for sig in SIGNALS}
    found = DemoSignals()
    found.install()
    try:
        yield found
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def test_a_signal_while_starting_stops_the_start_once(signals: DemoSignals) -> None:
    with pytest.raises(Stopped, match="the terminal closed"):
        os.kill(os.getpid(), signal.SIGHUP)
    os.kill(os.getpid(), signal.SIGINT)  # a second one does not cut short the stop of the first
    assert (signals.received, signals.exit_status, signals.why) == (signal.SIGHUP, 129, "the terminal closed")


def test_a_signal_while_a_process_starts_stops_the_start_once_it_is_held(signals: DemoSignals) -> None:
    held = []
    with pytest.raises(Stopped, match="interrupted"), signals.deferred():
        os.kill(os.getpid(), signal.SIGINT)
        held.append("the process")  # what the demo assigns after Popen returns
    assert held == ["the process"] and signals.exit_status == 130


def test_a_signal_while_stopping_is_noted_and_ignored(signals: DemoSignals) -> None:
    signals.stopping()
    os.kill(os.getpid(), signal.SIGTERM)
    with signals.deferred():
        pass
    assert (signals.exit_status, signals.why) == (143, "terminated")


def test_an_ignored_signal_stays_ignored() -> None:
    kept = {sig: signal.getsignal(sig) for sig in SIGNALS}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        DemoSignals().install()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is not kept[signal.SIGINT]
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)
