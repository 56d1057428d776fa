"""The rows the console makes of what the engine sends: a row of the self-modifications view (a
commit, a change held for review, or an attempt its test rejected, with its review state), and the
hook runs view's filter. Plain data, no Textual, no Rich."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from engine.protocol import Change, HookRun, PendingChange
from engine.protocol.records import Attempt, FailingSince, Provenance

ATTEMPT: Final = "rejected by its test"  # an attempt's state, as the engine names it


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
    """A row of the self-modifications view: a commit, a change held for review, or an attempt (an
    edit of the agent's that its test rejected: never installed, it takes no decision)."""

    key: str  # the commit's sha, or the pending change's id
    subject: str
    origin: str  # a commit's origin (agent, operator, ..., manual), or "pending"
    time: float | None
    files: list[str]
    trailers: dict[str, str | None]
    sha: str | None = None
    review: str | None = None
    pending_id: str | None = None
    # unreviewed, approved, reverted, none (needs no review); for a held change: pending, rejected,
    # stale or dismissed; for an attempt: "rejected by its test"
    state: str = "none"
    reverted_by: str | None = None
    provenance: Provenance | None = None
    note: str | None = None  # why a held change was rejected, went stale or was dismissed
    attempt_id: str | None = None
    # The hooks failing since this commit, that it most likely made fail ("failing since: 3 runs").
    failing: tuple[FailingSince, ...] = ()
    untested: str | None = None  # where a test's evidence would be: "no test covers prompts/chat.md"
    evals: str | None = None  # a held change's behaviour checks in a line
    changed_by: str | None = None  # a stale held change: the commit that changed its file under it

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
            failing=tuple(change.failing),
            untested=change.untested,
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
            untested=change.untested,
            evals=change.evals,
            changed_by=change.changed_by,
        )

    @classmethod
    def attempt(cls, attempt: Attempt) -> ChangeEntry:
        return cls(
            key=attempt.id,
            subject=attempt.message or f"edit {attempt.file}",
            origin="agent",
            time=attempt.created_at,
            files=[attempt.file],
            trailers={"tool": attempt.tool, "session": attempt.session, "call": attempt.call_id},
            state=ATTEMPT,
            provenance=attempt.provenance,
            attempt_id=attempt.id,
        )

    @property
    def revertible(self) -> bool:
        """A commit other than the first can be undone; a pending change is rejected instead, and an
        attempt was never installed."""
        return self.is_commit and self.origin != "initial"

    @property
    def is_commit(self) -> bool:
        return self.pending_id is None and self.attempt_id is None

    @property
    def awaits_decision(self) -> bool:
        """A held change not yet approved or rejected (nor gone stale: that can only be dismissed)."""
        return self.pending_id is not None and self.state == "pending"

    @property
    def stale(self) -> bool:
        """A held change whose file changed under it: it cannot be installed, only dismissed."""
        return self.pending_id is not None and self.state == "stale"

    @property
    def failing_runs(self) -> int:
        """The failed runs of the hooks failing since this change (`failing since: N runs`)."""
        return sum(f.runs for f in self.failing)

    @property
    def needs_review(self) -> bool:
        """What the operator has still to look at: held changes, and unreviewed self-modifications."""
        return self.awaits_decision or self.state == "unreviewed"

    @property
    def session(self) -> str | None:
        found = self.provenance.session if self.provenance else None
        return found or self.trailers.get("session")


def in_order(entries: Iterable[ChangeEntry]) -> dict[str, ChangeEntry]:
    """The rows of the changes view in their one order, however they came (a listing, an event, a
    restart): the commits as git lists them, oldest first, then what was never installed (the held
    changes and the attempts its test rejected) by the time it was proposed (its id breaking ties)."""
    listed = list(entries)
    commits = [e for e in listed if e.is_commit]
    held = sorted((e for e in listed if not e.is_commit), key=lambda e: (e.time or 0.0, e.key))
    return {e.key: e for e in commits + held}
