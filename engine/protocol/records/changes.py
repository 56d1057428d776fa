"""Changes to the workspace: commits as the operator sees them, why each was made (provenance and
the test behind it), changes held for review."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .base import JSONDict, Record, known_fields
from .failures import FailingSince
from .sessions import SessionInfo


@dataclass
class Evidence(Record):
    """What was checked before a hook change was installed: the hook's test, run against it."""

    test: str  # the test script, relative to tests/
    command: str  # what was run
    ok: bool
    exit_code: int | None
    duration_ms: float
    output_tail: str  # the last lines of its output
    passed: int | None = None  # counts, when the test printed them in a common form
    failed: int | None = None
    total: int | None = None


@dataclass
class Provenance(Record):
    """Why and how a change was made, recorded when it was made: the session and what the agent said
    in that turn up to the tool call, the call itself, and the validation behind it."""

    tool: str | None
    args: JSONDict
    session: str | None = None
    session_title: str | None = None
    call_id: str | None = None
    agent_text: str = ""  # the assistant's text in that turn, up to the call
    reasoning: str = ""  # its reasoning, where the provider sends it
    validation: Evidence | None = None
    at: float = 0.0

    @classmethod
    def from_dict(cls, data: JSONDict) -> Provenance:
        known = known_fields(cls, data)
        evidence = known.get("validation")
        known["validation"] = Evidence.from_dict(evidence) if isinstance(evidence, dict) else None
        return cls(**known)


@dataclass
class CommitInfo(Record):
    """A commit the engine just made."""

    sha: str
    message: str
    files: list[str] = field(default_factory=list)


@dataclass
class Change(Record):
    """A commit of the workspace's history as the operator sees it: who made it and its review."""

    sha: str
    time: int
    message: str
    subject: str
    trailers: dict[str, str]  # Evolve-* trailers, keys lower-cased without the prefix
    files: list[str]
    origin: str  # agent, operator, heartbeat, hook, external, initial, or manual
    review: str | None = None  # the review note, when the change was approved
    # unreviewed (an agent's or a hook's change to hooks, prompts or config, not yet looked at),
    # approved, reverted, or none (needs no review: initial, external, operator, data only)
    state: str = "none"
    reverted_by: str | None = None  # the commit that undid it
    reverts: str | None = None  # the commit it undoes
    provenance: Provenance | None = None
    # The hooks failing since it, that it most likely made fail (engine.failures): `failing since: 3 runs`.
    failing: list[FailingSince] = field(default_factory=list)
    # Where the evidence of a test would be, for a change that ran none: "no test covers prompts/chat.md"
    untested: str | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> Change:
        known = known_fields(cls, data)
        found = known.get("provenance")
        known["provenance"] = Provenance.from_dict(found) if isinstance(found, dict) else None
        known["failing"] = [
            FailingSince.from_dict(f) for f in known.get("failing") or [] if isinstance(f, dict)
        ]
        return cls(**known)


@dataclass
class FileAtChange(Record):
    """One file as a commit left it and as it was just before (`GET /v1/changes/{rev}/file`)."""

    sha: str  # the commit
    path: str  # the file after the commit
    old_path: str  # and before it (another path for a rename)
    content: str | None  # after the commit; None when the commit deleted the file (or it is binary)
    before: str | None  # in the commit's first parent; None when the commit created it (or it is binary)
    binary: bool = False  # either side holds a NUL byte: no content is given
    truncated: bool = False  # a side was cut at 2,000,000 characters


@dataclass
class PendingChange(Record):
    """An agent's change held for review (`"review": "gate"`)."""

    id: str
    file: str  # workspace-relative, e.g. "hooks/notes.py"
    base_sha256: str  # the file's content when the change was made; approval refuses if it moved
    message: str
    tool: str | None
    session: str | None
    call_id: str | None
    hook: str | None
    created_at: float
    content: str | None = None  # the proposed content (left out of listings)
    # pending (it can be decided) | approved | rejected | stale (its file changed under it: it can
    # only be dismissed) | dismissed
    status: str = "pending"
    decided_at: float | None = None
    commit: str | None = None
    note: str | None = None  # why it was decided or went stale, in words
    provenance: Provenance | None = None
    base: str | None = None  # the file's content it was based on (left out of listings)
    changed_by: str | None = None  # stale: the commit that changed the file under it, if committed
    untested: str | None = None  # "no test covers prompts/chat.md" when no test ran on it
    evals: str | None = (
        None  # its behaviour checks in a line, e.g. 'evals 5/5 → 4/5: "forget a note" fails after'
    )

    @classmethod
    def from_dict(cls, data: JSONDict) -> PendingChange:
        known = known_fields(cls, data)
        found = known.get("provenance")
        known["provenance"] = Provenance.from_dict(found) if isinstance(found, dict) else None
        return cls(**known)

    def summary(self) -> PendingChange:
        """The same change without its content and base (for listings and events)."""
        return replace(self, content=None, base=None)


@dataclass
class Attempt(Record):
    """A change the agent tried that was not installed: a hook edit its test rejected (also under
    the review gate, which never held it). It takes no review; it is a signal of what the agent
    tries and fails."""

    id: str
    file: str  # workspace-relative, e.g. "hooks/notes.py"
    created_at: float
    state: str = "rejected by its test"
    message: str = ""  # what the commit would have said, e.g. "edit notes.py"
    tool: str | None = None
    session: str | None = None
    call_id: str | None = None
    hook: str | None = None
    review: str = "log"  # the review mode then: under "gate" it is a proposal the gate refused
    provenance: Provenance | None = None  # the agent's words, and the test's evidence (its counts, tail)
    diff: str | None = None  # what it proposed, against the file as it was (left out of listings)
    output: str | None = None  # the test's whole output, at most 64 KiB (left out of listings)

    @classmethod
    def from_dict(cls, data: JSONDict) -> Attempt:
        known = known_fields(cls, data)
        found = known.get("provenance")
        known["provenance"] = Provenance.from_dict(found) if isinstance(found, dict) else None
        return cls(**known)

    def summary(self) -> Attempt:
        """The same attempt without its diff and output (for listings and events)."""
        return replace(self, diff=None, output=None)


@dataclass
class ReviewRecorded(Record):
    sha: str
    review: str


# ---- what the API takes and answers about them ---------------------------------------------------


@dataclass
class LoggedCommit(Record):
    """A commit of the workspace's history as git has it (`GET /v1/commits`)."""

    sha: str
    time: int
    message: str
    trailers: dict[str, str] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)


@dataclass
class CommitLog(Record):
    commits: list[LoggedCommit] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> CommitLog:
        return cls([LoggedCommit.from_dict(c) for c in data.get("commits") or []])


@dataclass
class ChangeList(Record):
    """`GET /v1/changes`: the history, newest first, and the changes held for review (without their
    content, decided ones included)."""

    changes: list[Change] = field(default_factory=list)
    pending: list[PendingChange] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)  # newest first, without diff and output
    # What waits: `awaiting` (held changes that can still be decided), `stale` (held changes whose
    # file changed under them: only dismissed), `unreviewed`, `attempts` (those listed)
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: JSONDict) -> ChangeList:
        return cls(
            [Change.from_dict(c) for c in data.get("changes") or []],
            [PendingChange.from_dict(p) for p in data.get("pending") or []],
            [Attempt.from_dict(a) for a in data.get("attempts") or [] if isinstance(a, dict)],
            dict(data.get("counts") or {}),
        )


@dataclass
class Impact(Record):
    """What reverting a change would touch: the sessions (without history) that froze their prompt
    while it was installed, the later changes to the same files (a `Change` as a dict, or only its
    `sha` when it is older than the history listed), and the sessions frozen while one of those was."""

    sha: str
    sessions: list[SessionInfo] = field(default_factory=list)
    later: list[JSONDict] = field(default_factory=list)
    later_sessions: list[SessionInfo] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> Impact:
        return cls(
            str(data.get("sha") or ""),
            [SessionInfo.from_dict(s) for s in data.get("sessions") or []],
            [c for c in data.get("later") or [] if isinstance(c, dict)],
            [SessionInfo.from_dict(s) for s in data.get("later_sessions") or []],
        )


@dataclass
class Answer(Record):
    """One answer of the agent, as the journal keeps it (the `observe_message` dispatch of a finished
    response)."""

    dispatch: str  # the dispatch's id (GET /v1/dispatches?session=…; the stage results view)
    at: float
    text: str  # the answer, at most 2,000 characters
    calls: list[str] = field(default_factory=list)  # the tools the response called
    turn: str | None = None  # the user message it answered, when known


@dataclass
class SessionReach(Record):
    """A session that runs a change: since when, and the agent's answers there since."""

    session: SessionInfo  # without history
    how: str  # "frozen under it" (its prompt was composed while it was installed) | "its hooks ran after it"
    since: float
    answers: list[Answer] = field(default_factory=list)  # newest first, at most 20
    more: int = 0  # answers since that are not listed

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionReach:
        known = known_fields(cls, data)
        known["session"] = SessionInfo.from_dict(known.get("session") or {})
        known["answers"] = [Answer.from_dict(a) for a in known.get("answers") or [] if isinstance(a, dict)]
        return cls(**known)


@dataclass
class Reach(Record):
    """`GET /v1/changes/{rev}/reach`: the sessions that run a change and what the agent answered in
    each since, while it was installed (until a later change to the same files)."""

    sha: str
    files: list[str] = field(default_factory=list)
    since: float = 0.0  # when it took effect
    until: float | None = None  # when the next change to the same files took effect
    later: str | None = None  # that change
    sessions: list[SessionReach] = field(default_factory=list)
    untested: str | None = None  # as the change's

    @classmethod
    def from_dict(cls, data: JSONDict) -> Reach:
        known = known_fields(cls, data)
        known["sessions"] = [
            SessionReach.from_dict(s) for s in known.get("sessions") or [] if isinstance(s, dict)
        ]
        return cls(**known)


@dataclass
class ChangeDiff(Record):
    """A commit's patch, cut at 2,000,000 characters."""

    sha: str
    diff: str
    truncated: bool = False


@dataclass
class Decision(Record):
    """An operator's approval or rejection: who (`by`, "operator" when not given) and, for a
    rejection, why."""

    by: str | None = None
    reason: str | None = None


@dataclass
class RevertRequest(Record):
    by: str | None = None
    refresh: list[str] = field(default_factory=list)  # sessions whose frozen prompt to drop afterwards
    together: bool = False  # also undo the later changes to the same files, in the same commit


@dataclass
class Reverted(Record):
    sha: str  # the new commit
    reverted: list[str] = field(default_factory=list)  # the commits it undoes, newest first
    files: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)  # the sessions whose frozen prompt was dropped


@dataclass
class PendingReview(PendingChange):
    """A pending change with its content and its diff against the file as it is now (what approving
    it would do); when the file changed since it was proposed, also what the agent changed and the
    file now, so that it never silently undoes that change."""

    diff: str = ""
    changed: bool = False  # the file changed since the change was proposed
    proposed_diff: str | None = None  # what the agent changed: its base to its content (when known)
    current: str | None = None  # the file now, when it changed since
    warning: str | None = None  # in words, when it changed since

    @classmethod
    def from_dict(cls, data: JSONDict) -> PendingReview:
        known = known_fields(cls, data)
        found = known.get("provenance")
        known["provenance"] = Provenance.from_dict(found) if isinstance(found, dict) else None
        return cls(**known)
