"""Replays: a change played on the journal's recorded inputs, before and after, and what differs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from .base import JSONDict, Record, known_fields


@dataclass
class FieldDiff(Record):
    """One field of a result that a change altered, word by word (a replay's finding)."""

    key: str  # the result's key, e.g. "system"; for discover "tools" or "tool notes_add"
    label: str  # what it is to the agent: "system prompt", "compaction prompt", ...
    # The text after the change with its changes marked, as [op, text]: "=" unchanged, "-" removed,
    # "+" added, "~" volatile (differs between two runs of the version before anyway).
    segments: list[list[str]] = field(default_factory=list)
    before_absent: bool = False  # the version before gave no such field
    after_absent: bool = False


@dataclass
class InputComparison(Record):
    """One recorded input of a stage, replayed with the version before and after a change."""

    source: str  # the journal's dispatch or run id replayed; for discover, hooks/<file>
    status: str  # changed | unchanged | failed
    recorded_at: float | None = None
    session: str | None = None
    session_title: str | None = None  # the session's title when the replay ran, if it had one
    errors_before: list[str] = field(default_factory=list)  # failed runs of the version before
    errors_after: list[str] = field(default_factory=list)
    diffs: list[FieldDiff] = field(default_factory=list)  # the fields that changed
    volatile: list[str] = field(default_factory=list)  # fields that differ from run to run anyway

    @classmethod
    def from_dict(cls, data: JSONDict) -> InputComparison:
        known = known_fields(cls, data)
        known["diffs"] = [FieldDiff.from_dict(d) for d in known.get("diffs") or []]
        return cls(**known)


SHOW_SOURCES = 3  # inputs named for a difference that several share


def inputs_named(found: list[InputComparison]) -> str:
    """The inputs that show one difference, as a replay names them: the first few with their session
    and time, then how many more."""
    names = [_input_name(c) for c in found[:SHOW_SOURCES]]
    more = len(found) - len(names)
    listed = ", ".join(names) + (f" and {more} more" if more else "")
    return f"{len(found)} inputs ({listed})" if len(found) > 1 else listed


def _input_name(c: InputComparison) -> str:
    parts = []
    if c.session_title:
        parts.append(f"session “{c.session_title}”")
    elif c.session:
        parts.append(f"session {c.session}")
    if c.recorded_at:
        parts.append(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(c.recorded_at)))
    return c.source + (f" [{', '.join(parts)}]" if parts else "")


def grouped_by_differences(
    found: list[InputComparison],
) -> list[tuple[list[FieldDiff], list[InputComparison]]]:
    """Inputs with the very same differences together (twenty sessions, one system prompt edit), in
    the order each group first appears: how a replay's differences are shown, each once."""
    groups: dict[str, tuple[list[FieldDiff], list[InputComparison]]] = {}
    for c in found:
        key = json.dumps([d.to_dict() for d in c.diffs], sort_keys=True)
        groups.setdefault(key, (c.diffs, []))[1].append(c)
    return list(groups.values())


@dataclass
class StageComparison(Record):
    """A stage's results on its recorded inputs, before and after a change."""

    stage: str
    inputs: int = 0  # inputs replayed: changed + unchanged + failed
    changed: int = 0
    unchanged: int = 0
    failed: int = 0  # inputs where a run failed before or after
    failed_before: int = 0
    failed_after: int = 0
    volatile: list[str] = field(default_factory=list)  # fields left out where they vary by themselves
    note: str | None = None  # e.g. why nothing was replayed
    comparisons: list[InputComparison] = field(default_factory=list)  # left out of summaries

    @classmethod
    def from_dict(cls, data: JSONDict) -> StageComparison:
        known = known_fields(cls, data)
        known["comparisons"] = [InputComparison.from_dict(c) for c in known.get("comparisons") or []]
        return cls(**known)


@dataclass
class ReplayResult(Record):
    """A replay of a change (a commit or a pending change) on the journal's recorded inputs."""

    id: str
    target: str  # the commit's sha, or the pending change's id
    kind: str  # commit | pending
    title: str
    files: list[str] = field(default_factory=list)  # the files the change touches
    before: str = ""  # what "before" is, e.g. "the workspace now, with prompts/chat.md as at 3f2a…^"
    after: str = ""
    limit: int = 20  # recorded inputs per stage, at most
    state: str = "running"  # running | done | cancelled | failed
    error: str | None = None  # why it failed
    warnings: list[str] = field(default_factory=list)
    stages: list[StageComparison] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float | None = None
    duration_ms: float = 0.0
    done: int = 0  # replays of one input with one version, finished so far
    total: int = 0

    @classmethod
    def from_dict(cls, data: JSONDict) -> ReplayResult:
        known = known_fields(cls, data)
        known["stages"] = [StageComparison.from_dict(s) for s in known.get("stages") or []]
        return cls(**known)

    def summary(self) -> ReplayResult:
        """The same replay with the figures of each stage but without its comparisons (events)."""
        stages = [{**s.to_dict(), "comparisons": []} for s in self.stages]
        return ReplayResult.from_dict({**self.to_dict(), "stages": stages})


@dataclass
class ReplayProgress(Record):
    """A replay under way: `done` of `total` replays of one input with one version."""

    id: str
    target: str
    done: int
    total: int
    message: str = ""


@dataclass
class ReplayRequest(Record):
    """`POST /v1/changes/{rev}/replay`, `POST /v1/pending/{id}/replay`."""

    stages: list[str] | None = None  # None: the stages the change can affect
    limit: int | None = None  # recorded inputs per stage (the engine's default when None)
    wait: bool = False  # answer when it has finished


@dataclass
class ReplayCancelled(Record):
    id: str
    cancelled: bool = True
