"""Hooks failing at a stage, and the change that most likely made them fail."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import JSONDict, Record, known_fields


@dataclass
class Suspect(Record):
    """The change that most likely made a hook start failing: the newest commit before its first
    failure (and after it last ran fine there) that changed the hook, a file its error names, a
    prompt or the config."""

    sha: str
    subject: str
    origin: str  # agent, operator, heartbeat, hook, external, initial, or manual (as a Change's)
    at: float  # when it took effect (epoch seconds)
    before_s: float  # how long before the first failure it took effect
    files: list[str] = field(default_factory=list)  # what it changed of what the hook depends on
    because: str = ""  # why it is suspected, e.g. "it changed hooks/notes.py, the hook itself"
    session: str | None = None  # the session that made it
    session_title: str | None = None
    pending: str | None = None  # the held change it installed (the review gate), if any


@dataclass
class Failure(Record):
    """A hook failing at a stage: from its first failed run there until it runs fine there again.

    `state` is `started` (the event of its first failure, once the cause is known), `failing` (a
    later failed run; `runs` counts them all) or `cleared` (it ran fine again: `cleared_by`)."""

    id: str
    hook: str  # the hook file, relative to hooks/
    stage: str
    state: str = "started"
    error: str = ""  # the error's own last line: the exception from stderr, else the run's error
    exit: str | None = None  # the run's error as the engine records it ("exit 1", "timeout: …")
    where: str | None = None  # the last line of the workspace a traceback names, e.g. "hooks/notes.py:42"
    runs: int = 0  # failed runs so far
    first_run: str = ""
    first_at: float = 0.0
    last_run: str = ""
    last_at: float = 0.0
    last_ok_at: float | None = None  # when it last ran fine at this stage before, if the journal knows
    suspect: Suspect | None = None
    cause: str = ""  # in words: 'since 7a46fd1, agent, 1 min before the first failure, session "Errands"'
    fallback: str | None = None  # what the stage fell back to, e.g. the recover defaults
    message: str = ""  # the alert: "hooks/notes.py started failing at heartbeat: TypeError: … (since …)"
    recurs: bool = False  # it failed there less than a minute before this began (a flapping hook)
    cleared_at: float | None = None
    cleared_by: str | None = None  # the run that ran fine

    @classmethod
    def from_dict(cls, data: JSONDict) -> Failure:
        known = known_fields(cls, data)
        found = known.get("suspect")
        known["suspect"] = Suspect.from_dict(found) if isinstance(found, dict) else None
        return cls(**known)


@dataclass
class FailingSince(Record):
    """On a change: a hook that has failed since it (`failing since: 3 runs`)."""

    failure: str  # the Failure's id
    hook: str
    stage: str
    runs: int
    first_at: float
    error: str = ""


# ---- what the API answers about them --------------------------------------------------------------


@dataclass
class FailureList(Record):
    """`GET /v1/failures`: the hooks failing now, newest first, and those that recently ran fine
    again (since this engine started, at most 20)."""

    failures: list[Failure] = field(default_factory=list)
    cleared: list[Failure] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> FailureList:
        return cls(
            [Failure.from_dict(f) for f in data.get("failures") or []],
            [Failure.from_dict(f) for f in data.get("cleared") or []],
        )
