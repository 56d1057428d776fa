"""The rows the console makes of what the engine sends: a row of the self-modifications view (a
commit, or a change held for review, with its review state), and the hook runs view's filter.
Plain data, no Textual, no Rich."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.protocol import Change, HookRun, PendingChange
from engine.protocol.records import Provenance


@dataclass(frozen=True)
class RunFilter:
    """The hook runs view's filters, as last applied (enter in a field, or the failures switch)."""

    stage: str | None = None
    hook: str | None = None
    session: str | None = None
    failed: bool = False

    def params(self) -> dict[str, Any]:
        """The runs listing's query parameters (`calls.runs`) that filter the same way."""
        values: dict[str, Any] = {
            k: v for k in ("stage", "hook", "session") if (v := getattr(self, k)) is not None
        }
        if self.failed:
            values["failed"] = True
        return values

    def matches(self, run: HookRun) -> bool:
        if self.failed and not run.error:
            return False
        return all(
            getattr(run, k) == value
            for k in ("stage", "hook", "session")
            if (value := getattr(self, k)) is not None
        )


@dataclass(frozen=True)
class ChangeEntry:
    """A row of the self-modifications view: a commit, or a change held for review."""

    key: str  # the commit's sha, or the pending change's id
    subject: str
    origin: str  # a commit's origin (agent, operator, ..., manual), or "pending"
    time: float | None
    files: list[str]
    trailers: dict[str, str | None]
    sha: str | None = None
    review: str | None = None
    pending_id: str | None = None
    # unreviewed, approved, reverted, none (needs no review); for a held change: pending, rejected
    # or stale
    state: str = "none"
    reverted_by: str | None = None
    provenance: Provenance | None = None
    note: str | None = None  # why a held change was rejected (or could not be installed)

    @classmethod
    def commit(cls, change: Change) -> ChangeEntry:
        return cls(
            key=change.sha,
            subject=change.subject,
            origin=change.origin,
            time=change.time,
            files=list(change.files),
            trailers=dict(change.trailers),
            sha=change.sha,
            review=change.review,
            state=change.state,
            reverted_by=change.reverted_by,
            provenance=change.provenance,
        )

    @classmethod
    def pending(cls, change: PendingChange) -> ChangeEntry:
        return cls(
            key=change.id,
            subject=change.message,
            origin="pending",
            time=change.created_at,
            files=[change.file],
            trailers={"tool": change.tool, "session": change.session, "call": change.call_id},
            pending_id=change.id,
            state=change.status,
            provenance=change.provenance,
            note=change.note,
        )

    @property
    def revertible(self) -> bool:
        """A commit other than the first can be undone; a pending change is rejected instead."""
        return self.pending_id is None and self.origin != "initial"

    @property
    def awaits_decision(self) -> bool:
        """A held change not yet approved or rejected."""
        return self.pending_id is not None and self.state == "pending"

    @property
    def needs_review(self) -> bool:
        """What the operator has still to look at: held changes, and unreviewed self-modifications."""
        return self.awaits_decision or self.state == "unreviewed"

    @property
    def session(self) -> str | None:
        found = self.provenance.session if self.provenance else None
        return found or self.trailers.get("session")
