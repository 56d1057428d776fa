"""What the operator is told when something the console did failed, on plain values: what it was
doing, what happened and what to do, never the name of a function or of an exception class."""

from __future__ import annotations

import re

import httpx

from evolve_console.client import EngineError, EngineGone, why_unanswered
from evolve_console.failures import failure_text

# What a message must not show: a function's name (approve_change), an exception's (EngineError,
# ConnectError), a traceback's parts.
INTERNAL = re.compile(r"\b[a-z]+_[a-z_]+\b|Error\b|Exception\b|\(\w+Error\)|Traceback")


def test_a_refusal_says_what_was_being_done_and_the_engines_own_reason() -> None:
    refused = EngineError("prompts/chat.md changed after the agent proposed this; ask it to redo the change")
    said = failure_text("approve the change", refused, command=True)
    assert said == (
        "could not approve the change: prompts/chat.md changed after the agent proposed this; "
        "ask it to redo the change"
    )
    assert not INTERNAL.search(said), said


def test_no_answer_says_why_and_whether_a_command_may_have_been_done() -> None:
    url = "http://127.0.0.1:8765"
    reasons = {
        httpx.ConnectError("refused"): "nothing listens at that address",
        httpx.ConnectTimeout("slow"): "it did not take the connection in time",
        httpx.ReadTimeout("slow"): "it took too long to answer",
        httpx.RemoteProtocolError("closed"): "the connection closed before it answered",
        httpx.ReadError("reset"): "the connection closed before it answered",
    }
    for exc, reason in reasons.items():
        assert why_unanswered(exc) == reason
    gone = EngineGone(f"the engine at {url} does not answer: {why_unanswered(httpx.ConnectError('x'))}")
    fired = failure_text("fire the heartbeat", gone, command=True)
    assert fired == (
        f"could not fire the heartbeat: the engine at {url} does not answer: nothing listens at that "
        "address. It may have been done all the same: look before you try again"
    )
    read = failure_text("load the change", gone, command=False)
    assert read.endswith("nothing listens at that address. Try again in a moment")
    for said in (fired, read):
        assert not INTERNAL.search(said.replace(url, "")), said


def test_a_fault_of_the_console_itself_is_said_so_without_its_class() -> None:
    said = failure_text("load the hook run", KeyError("stdout_lines"), command=False)
    assert said.startswith("could not load the hook run: the console itself went wrong (")
    assert "KeyError" not in said and "restart the console" in said
    assert "no reason given" in failure_text("load the hook run", RuntimeError(), command=False)
