"""Records that cross the API: each has one definition here and turns into a plain JSON-able dict
(`to_dict`) and back (`from_dict`, which ignores fields it does not know, so that an older client
can read a newer engine's records)."""

from __future__ import annotations

import copy
import json
import marshal
import time
import uuid
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, TypeVar

JSONDict = dict[str, Any]
_R = TypeVar("_R")


def new_id(prefix: str) -> str:
    """A sortable, unique id: `<prefix>_<ms since epoch, hex>_<random>`."""
    return f"{prefix}_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:8]}"


def _known(cls: type[_R], data: JSONDict) -> JSONDict:
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return {k: v for k, v in data.items() if k in names}


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """What dataclasses.asdict makes of a field's value (a deep copy, dataclasses turned into
    dicts), many times faster for plain data: a record's input can hold a whole session."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict or kind is list:
        try:  # a deep copy in C for what marshal takes: dict, list, tuple, str, numbers, None
            return marshal.loads(marshal.dumps(value))
        except (ValueError, RecursionError):
            pass  # something else inside (a dataclass, ...): one level at a time
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is list:
        return [_plain(v) for v in value]
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return copy.deepcopy(value)


class Record:
    """A dataclass that converts to and from a JSON-able dict."""

    def to_dict(self) -> JSONDict:
        """A snapshot: the record's fields as plain data, deep-copied (as dataclasses.asdict)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_dict(cls: type[_R], data: JSONDict) -> _R:
        return cls(**_known(cls, data))


@dataclass
class HookRun(Record):
    """One execution of one hook script for one stage."""

    id: str
    stage: str
    hook: str  # the hook's file name relative to hooks/, e.g. "notes.py"
    started_at: float  # epoch seconds
    input: JSONDict  # exactly what was written to stdin
    session: str | None = None
    dispatch_id: str | None = None  # the stage dispatch this run belongs to, if any
    stdout_lines: list[str] = field(default_factory=list)
    logs: list[Any] = field(default_factory=list)
    stderr: str = ""
    stderr_truncated: bool = False
    result: JSONDict | None = None  # parsed and merged JSONL output, None on failure
    exit_code: int | None = None
    signal: str | None = None  # e.g. "SIGKILL" when the process died by a signal
    duration_ms: float = 0.0
    error: str | None = None  # set when the run failed; a precise, human-readable reason

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class RunStarted(Record):
    """A hook run that has begun (its record follows when it ends)."""

    id: str
    stage: str
    hook: str
    session: str | None = None


@dataclass
class StageResult(Record):
    """The merged outcome of dispatching one stage to every hook."""

    id: str
    stage: str
    started_at: float
    context: JSONDict
    session: str | None = None
    hooks: list[str] = field(default_factory=list)  # hook files that ran, in order
    runs: list[str] = field(default_factory=list)  # HookRun ids, recover runs included
    merged: JSONDict = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # hook files whose run failed
    recovered: bool = False  # whether the recover stage stepped in
    duration_ms: float = 0.0
    turn: str | None = None  # the user message whose turn this dispatch belongs to, when known


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
        known = _known(cls, data)
        evidence = known.get("validation")
        known["validation"] = Evidence.from_dict(evidence) if isinstance(evidence, dict) else None
        return cls(**known)


@dataclass
class ToolCall(Record):
    """One call of a tool, as the agent or an operator made it: one of evolve's own (a builtin or a
    hook tool, `origin` "evolve") or one of opencode's (its built-in tools and other plugins' tools,
    `origin` "opencode", recorded from what the plugin sees of it)."""

    id: str
    tool: str
    args: JSONDict  # what the tool received (after a before_tool hook's rewrite)
    started_at: float
    session: str | None = None
    call_id: str | None = None
    output: str | None = None  # what the model received (after an after_tool hook's replacement)
    error: str | None = None  # set when the call was refused or failed; the first line of the output
    commit: str | None = None  # sha of the commit the call produced, if any
    duration_ms: float = 0.0
    pending: str | None = None  # the pending change it produced, under the review gate
    origin: str = "evolve"  # evolve: evolve's own tool; opencode: a tool of opencode
    title: str | None = None  # opencode's title of the call, when it gives one
    # The permission decision when known: not asked, asked (not decided yet), allowed or denied; and
    # by whom: rule (opencode's permission config), user, opencode, or hook <file> (on_permission).
    permission: str | None = None
    permission_by: str | None = None
    model_args: JSONDict | None = None  # what the model asked for, when a before_tool hook rewrote it
    tool_output: str | None = None  # what the tool returned, when an after_tool hook replaced it
    changed_by: list[str] = field(default_factory=list)  # e.g. "before_tool: args", "after_tool: result"
    context: JSONDict | None = None  # what the agent said in the turn before the call: {text, reasoning}
    turn: str | None = None  # the user message whose turn made the call, when known
    validation: Evidence | None = None  # the test run behind a hook change

    @classmethod
    def from_dict(cls, data: JSONDict) -> ToolCall:
        known = _known(cls, data)
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

    @classmethod
    def from_dict(cls, data: JSONDict) -> Change:
        known = _known(cls, data)
        found = known.get("provenance")
        known["provenance"] = Provenance.from_dict(found) if isinstance(found, dict) else None
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
    status: str = "pending"  # pending | approved | rejected | stale
    decided_at: float | None = None
    commit: str | None = None
    note: str | None = None
    provenance: Provenance | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> PendingChange:
        known = _known(cls, data)
        found = known.get("provenance")
        known["provenance"] = Provenance.from_dict(found) if isinstance(found, dict) else None
        return cls(**known)

    def summary(self) -> PendingChange:
        """The same change without its content (for listings and events)."""
        return replace(self, content=None)


@dataclass
class ReviewRecorded(Record):
    sha: str
    review: str


@dataclass
class Notice(Record):
    """A warning or an error the operator should see, and where it comes from."""

    source: str
    message: str


@dataclass
class HookInfo(Record):
    """A hook as discovery registered it."""

    file: str
    name: str
    test: str | None = None
    tools: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    stages: list[str] | None = None  # the stages it declared it handles; None: every stage
    protocol: str = "opencode-evolve"  # the protocol it is treated as: opencode-evolve or hcp
    protocol_reason: str = ""  # why (docs/hooks.md, "Two protocols")
    protocol_settle: str | None = None  # when the evidence was ambiguous: the config line that settles it
    stage_warnings: list[str] = field(default_factory=list)  # problems of its declared stages


@dataclass
class SkippedHook(Record):
    file: str
    reason: str


@dataclass
class HooksDiscovered(Record):
    hooks: list[HookInfo]
    skipped: list[SkippedHook]

    @classmethod
    def from_dict(cls, data: JSONDict) -> HooksDiscovered:
        return cls(
            [HookInfo.from_dict(h) for h in data.get("hooks") or []],
            [SkippedHook.from_dict(s) for s in data.get("skipped") or []],
        )


@dataclass
class ConfigChanged(Record):
    config: JSONDict
    errors: list[str] = field(default_factory=list)


@dataclass
class ConnectionInfo(Record):
    """One opencode process connected through the shim."""

    id: str
    url: str
    directory: str
    mode: str = "unknown"  # in-process | server
    shim_version: str | None = None
    command: str | None = None  # opencode's subcommand: run, serve, or None (the TUI)
    connected_at: float = 0.0
    last_ok: float | None = None
    last_error: str | None = None


@dataclass
class OpencodeChanged(Record):
    """An opencode process connected or went away."""

    event: str  # connected | disconnected
    connection: ConnectionInfo
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> OpencodeChanged:
        return cls(
            str(data.get("event")),
            ConnectionInfo.from_dict(data.get("connection") or {}),
            data.get("reason"),
        )


@dataclass
class NotificationSent(Record):
    source: str | None
    message: str
    recipients: list[str]


@dataclass
class ValidationRun(Record):
    hook: str
    ok: bool
    output: str


@dataclass
class ActionDone(Record):
    type: str
    session: str | None = None
    title: str | None = None


@dataclass
class Delivered(Record):
    """A notification a session received: its text, when, from which session, about which change."""

    text: str
    at: float
    source: str | None = None  # the session whose hooks asked for it
    change: str | None = None  # the commit or pending change it is about, if any


@dataclass
class SessionInfo(Record):
    """What the engine knows about one opencode session."""

    id: str
    title: str | None = None
    system: list[str] | None = None  # the frozen system prompt, exactly as sent
    frozen_at: float | None = None
    agent: str | None = None  # the agent that last answered in it
    model: dict[str, str] | None = None
    notifications: list[Delivered] = field(default_factory=list)
    busy: bool = False
    tokens: int | None = None  # input + output tokens since the last compaction, as opencode counted
    connection: str | None = None  # the opencode connection it was last seen through
    created_at: float | None = None
    updated_at: float | None = None
    history_length: int = 0
    history: list[Any] | None = None  # only in the answer about one session
    tools: list[JSONDict] | None = None  # the tools offered to the model: {name, description, parameters}

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionInfo:
        known = _known(cls, data)
        known["notifications"] = [
            Delivered.from_dict(n) if isinstance(n, dict) else Delivered(str(n), 0.0)
            for n in known.get("notifications") or []
        ]
        return cls(**known)


@dataclass
class SessionChanged(Record):
    """A session appeared or changed: `change` is created, updated, frozen, notified or forgotten."""

    change: str
    session: SessionInfo

    @classmethod
    def from_dict(cls, data: JSONDict) -> SessionChanged:
        return cls(str(data.get("change")), SessionInfo.from_dict(data.get("session") or {}))


@dataclass
class TickResult(Record):
    """One heartbeat tick: what triggered it, what it did, or why it was skipped."""

    trigger: str  # timer | manual
    started_at: float
    outcome: str = "ok"  # ok | skipped | failed | cancelled
    reason: str | None = None
    session: str | None = None
    model: dict[str, str] | None = None
    cleanup: JSONDict | None = None  # {"mode", "due_to", "count", "tokens", "ok", "error", ...}
    user: str | None = None
    count: int | None = None
    tokens: int | None = None
    duration_ms: float = 0.0
    dispatch_id: str | None = None


@dataclass
class HeartbeatStatus(Record):
    """The heartbeat as it is now: its timer, its session and its cleanup thresholds."""

    enabled: bool
    interval_ms: int
    connected: bool
    paused: bool
    running: bool
    next_at: float | None
    next_in_s: float | None
    count: int
    count_threshold: int | None
    tokens: int | None
    tokens_threshold: int | None
    cleanup: str
    session: str | None
    time: str | None
    model: dict[str, str] | None
    last: TickResult | None = None
    connected_at: float | None = None  # when the opencode it waits for connected
    # Where interval_ms comes from: config, agent (evolve_heartbeat_set), or config (disabled), which wins.
    interval_source: str = "config"

    @classmethod
    def from_dict(cls, data: JSONDict) -> HeartbeatStatus:
        known = _known(cls, data)
        last = known.get("last")
        known["last"] = TickResult.from_dict(last) if isinstance(last, dict) else None
        return cls(**known)


@dataclass
class HeartbeatChanged(Record):
    """Something happened to the heartbeat: `event` is tick_started, tick, cleanup, paused,
    resumed, connected, disconnected, or chosen (the agent set its cadence); the status is always the
    one after it."""

    event: str
    status: HeartbeatStatus
    tick: TickResult | None = None
    cleanup: JSONDict | None = None
    trigger: str | None = None

    @classmethod
    def from_dict(cls, data: JSONDict) -> HeartbeatChanged:
        tick = data.get("tick")
        return cls(
            str(data.get("event")),
            HeartbeatStatus.from_dict(data.get("status") or {}),
            TickResult.from_dict(tick) if isinstance(tick, dict) else None,
            data.get("cleanup"),
            data.get("trigger"),
        )


@dataclass
class EngineStatus(Record):
    """`GET /v1/status`: the engine's configuration, hooks, connections and heartbeat."""

    workspace: str
    pid: int
    config: JSONDict
    config_errors: list[str]
    config_warnings: list[str]
    hooks: list[HookInfo]
    skipped: list[SkippedHook]
    opencode: list[ConnectionInfo]
    sessions: int
    journal: dict[str, int] | None
    model: dict[str, str] | None
    busy: bool
    heartbeat: HeartbeatStatus
    # Requests the API answered since the engine started, by "METHOD /route/{param}".
    requests: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: JSONDict) -> EngineStatus:
        known = _known(cls, data)
        known["hooks"] = [HookInfo.from_dict(h) for h in known.get("hooks") or []]
        known["skipped"] = [SkippedHook.from_dict(s) for s in known.get("skipped") or []]
        known["opencode"] = [ConnectionInfo.from_dict(c) for c in known.get("opencode") or []]
        known["heartbeat"] = HeartbeatStatus.from_dict(known.get("heartbeat") or {})
        return cls(**known)


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
        known = _known(cls, data)
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
        known = _known(cls, data)
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
        known = _known(cls, data)
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
