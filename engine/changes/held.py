"""What the review gate says of a held change whose file changed under it: why it is stale, what the
agent is told, and the refusal of an approval with the three versions a reviewer compares (what the
change was based on, what is there now, what it would install). Plain words: what happened, what to
do."""

from __future__ import annotations

from typing import Any

from engine.changes.textdiff import unified_diff
from engine.protocol.records import PendingChange


def what_changed(changed_by: str | None, subject: str | None) -> str:
    """The change that moved the file, in words."""
    if not changed_by:
        return "a change not yet committed"
    return f"commit {changed_by[:10]}" + (f' "{subject}"' if subject else "")


def stale_note(item: PendingChange, changed_by: str | None, subject: str | None) -> str:
    """Why a held change is stale, as the operator reads it."""
    return (
        f"{item.file} changed after the agent proposed this change ({what_changed(changed_by, subject)} "
        "changed it), so it can no longer be approved as it is: it would undo that change. Dismiss it, "
        "or ask the agent to make its change again on the file as it is now."
    )


def told_stale(item: PendingChange, changed_by: str | None, subject: str | None) -> str:
    """What the agent is told when its held change goes stale."""
    return (
        f'Your proposed change "{item.message}" to {item.file} was not installed: {item.file} changed '
        f"after you proposed it ({what_changed(changed_by, subject)}). If it is still wanted, read "
        f"{item.file} as it is now and make the change again."
    )


def refusal(
    item: PendingChange, base: str | None, current: str, changed_by: str | None, subject: str | None
) -> tuple[str, dict[str, Any]]:
    """The refusal of an approval of a stale change: the message and the three-way view."""
    message = (
        f"Not approved: {item.file} changed after the agent proposed this change "
        f"({what_changed(changed_by, subject)} changed it), and installing it now would undo that "
        "change. Nothing was installed. Compare what the change was based on, what is there now and "
        "what it would install; then dismiss it, or ask the agent to redo it on the file as it is now."
    )
    proposed = item.content or ""
    details: dict[str, Any] = {
        "stale": True,
        "file": item.file,
        "changed_by": changed_by,
        "base": base,  # None when the version it was based on is no longer known
        "current": current,
        "proposed": proposed,
        # what the agent changed, and what changed under it, each from the version it was based on
        "proposed_diff": unified_diff(base, proposed, item.file) if base is not None else None,
        "changed_diff": unified_diff(base, current, item.file) if base is not None else None,
    }
    return message, details


def already(item: PendingChange) -> str:
    """Why a held change that was decided cannot be decided again."""
    if item.status == "approved":
        installed = f" and installed as commit {item.commit[:10]}" if item.commit else ""
        return f"This held change was already approved{installed}; nothing is left to decide."
    if item.status == "stale":
        return f"{item.note or 'This held change is stale.'}"
    return f"This held change was already {item.status} ({item.note or 'no reason given'}); nothing is left to decide."
