"""What the operator is told when something the console did failed: what it was doing, what happened
and what to do, in words. Never the name of a function or of an exception class: a worker is named
for what it does ("approve the change"), the engine's refusals are its own explanation, and a
request that got no answer says why (`client.why_unanswered`)."""

from __future__ import annotations

from .client import EngineError, EngineGone


def failure_text(doing: str, error: BaseException | None, command: bool) -> str:
    """`doing`: what was being done, as a verb phrase ("approve the change"); `command`: whether it
    changes something in the engine (a command may have been done although its answer was lost,
    a read is only asked again)."""
    if isinstance(error, EngineGone):
        if command:
            return (
                f"could not {doing}: {error}. It may have been done all the same: look before you try again"
            )
        return f"could not {doing}: {error}. Try again in a moment"
    if isinstance(error, EngineError):
        return f"could not {doing}: {error}"
    detail = str(error) if error is not None and str(error) else "no reason given"
    return (
        f"could not {doing}: the console itself went wrong ({detail}). "
        "It keeps running; try again, and if this comes back, restart the console"
    )
