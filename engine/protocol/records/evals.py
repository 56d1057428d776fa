"""Behaviour checks: the workspace's scenarios (`evals/*.jsonc`), run through the real harness at the
version before a change and after it, and what differs (docs/evals.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import JSONDict, Record, known_fields


@dataclass
class ScenarioInfo(Record):
    """A scenario as the workspace holds it: its messages and its expectations in words."""

    name: str
    file: str  # workspace-relative, e.g. "evals/forget-a-note.jsonc"
    messages: list[str] = field(default_factory=list)
    expectations: list[str] = field(default_factory=list)  # e.g. 'calls notes_forget'
    agent: str | None = None  # the opencode agent that answers (None: opencode's default)
    description: str | None = None


@dataclass
class ScenarioList(Record):
    """`GET /v1/scenarios`: the scenarios of the workspace as it is now, and the files that are wrong
    (each error `file:line:column: what`)."""

    scenarios: list[ScenarioInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: JSONDict) -> ScenarioList:
        return cls(
            [ScenarioInfo.from_dict(s) for s in data.get("scenarios") or []],
            [str(e) for e in data.get("errors") or []],
        )


@dataclass
class ToolUse(Record):
    """One tool call the agent made in a run: its arguments and what it got back."""

    tool: str
    args: JSONDict = field(default_factory=dict)
    output: str = ""
    # completed | error (the tool failed) | unavailable (a tool the copy does not offer: the model
    # asked for it anyway, and was told it does not exist)
    status: str = "completed"
    error: str | None = None


@dataclass
class HookUse(Record):
    """A hook run of the copy's engine during a run (from its journal)."""

    hook: str
    stage: str
    ok: bool = True
    error: str | None = None
    duration_ms: float = 0.0


@dataclass
class Check(Record):
    """One expectation of a scenario, checked against a run."""

    expectation: str  # in words: 'calls notes_forget', 'the answer contains "dropped"'
    passed: bool
    detail: str = ""  # what was seen instead, when it failed


@dataclass
class ScenarioRun(Record):
    """One run of a scenario (or one re-asked turn) at one version, in its own opencode session."""

    scenario: str
    version: str  # before | after
    attempt: int = 1  # 1..repeat
    state: str = "passed"  # passed | failed | error (it could not run to its end) | refused
    error: str | None = None
    answers: list[str] = field(default_factory=list)  # the agent's answer to each message
    tools: list[ToolUse] = field(default_factory=list)
    hooks: list[HookUse] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    steps: int = 0  # LLM round trips (assistant messages)
    tokens: dict[str, int] = field(default_factory=dict)  # input, output, reasoning, cache_read, cache_write
    cost: float = 0.0  # as opencode counts it for the provider
    duration_ms: float = 0.0
    session: str | None = None  # the session in the copy's opencode
    history: int = 0  # a re-asked turn: messages of its recorded conversation given before it

    @classmethod
    def from_dict(cls, data: JSONDict) -> ScenarioRun:
        known = known_fields(cls, data)
        known["tools"] = [ToolUse.from_dict(t) for t in known.get("tools") or []]
        known["hooks"] = [HookUse.from_dict(h) for h in known.get("hooks") or []]
        known["checks"] = [Check.from_dict(c) for c in known.get("checks") or []]
        return cls(**known)

    @property
    def answer(self) -> str:
        """The answer to the last message."""
        return self.answers[-1] if self.answers else ""


@dataclass
class ScenarioComparison(Record):
    """A scenario (or a re-asked turn) before and after a change, side by side."""

    name: str
    file: str | None = None  # the scenario's file; None for a re-asked turn
    repeat: int = 1
    passed_before: int = 0  # runs that passed, of `repeat`
    passed_after: int = 0
    # regressed (fewer runs pass after), improved, passing (all pass, both), failing (it passed
    # in neither version, or as often in both), refused (not run), differs / same (a re-asked turn:
    # whether the answer or the tool calls changed)
    status: str = "passing"
    failed_before: list[str] = field(default_factory=list)  # the checks that failed, with what was seen
    failed_after: list[str] = field(default_factory=list)
    answer_before: str = ""  # the answer to the last message, in the first run of each version
    answer_after: str = ""
    # The answer after with its changes marked, as [op, text]: "=" unchanged, "-" removed, "+" added.
    answer_diff: list[list[str]] = field(default_factory=list)
    tools_before: list[str] = field(default_factory=list)  # the calls in words: 'notes_forget {"id": 3}'
    tools_after: list[str] = field(default_factory=list)
    note: str | None = None  # why it was refused; how a turn was re-asked
    runs: list[ScenarioRun] = field(default_factory=list)  # left out of summaries

    @classmethod
    def from_dict(cls, data: JSONDict) -> ScenarioComparison:
        known = known_fields(cls, data)
        known["runs"] = [ScenarioRun.from_dict(r) for r in known.get("runs") or []]
        return cls(**known)


@dataclass
class EvalRun(Record):
    """The behaviour checks of a change (a commit or a pending change): each scenario run at the
    version before and after it, through opencode with the evolve plugin, in throwaway copies."""

    id: str
    target: str  # the commit's sha, or the pending change's id
    kind: str  # commit | pending
    title: str
    mode: str = "scenarios"  # scenarios | turns (the last user turns re-asked)
    files: list[str] = field(default_factory=list)  # the files the change touches
    before: str = ""  # what "before" is, e.g. "the workspace at 3f2a1b…"
    after: str = ""
    repeat: int = 1
    model: str | None = None  # provider/model the agent ran with
    state: str = "running"  # running | done | cancelled | failed
    error: str | None = None
    summary: str = ""  # e.g. 'evals 5/5 → 4/5: "forget a note" fails after'
    regressed: list[str] = field(default_factory=list)  # the scenarios that pass less often after
    warnings: list[str] = field(default_factory=list)
    scenarios: list[ScenarioComparison] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float | None = None
    duration_ms: float = 0.0
    # Where the time went: per version (before, after) copy_ms, engine_start_ms, connect_ms, stop_ms;
    # for the opencode both share ("opencode") home_ms, import_ms, start_ms, stop_ms
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    done: int = 0  # runs finished so far (scenarios x repeat x 2 versions)
    total: int = 0

    @classmethod
    def from_dict(cls, data: JSONDict) -> EvalRun:
        known = known_fields(cls, data)
        known["scenarios"] = [ScenarioComparison.from_dict(s) for s in known.get("scenarios") or []]
        return cls(**known)

    def brief(self) -> EvalRun:
        """The same run without each scenario's runs (events, listings)."""
        scenarios = [{**s.to_dict(), "runs": []} for s in self.scenarios]
        return EvalRun.from_dict({**self.to_dict(), "scenarios": scenarios})

    @property
    def regression(self) -> bool:
        return bool(self.regressed)


@dataclass
class EvalProgress(Record):
    """Behaviour checks under way: `done` of `total` runs, and what is happening now."""

    id: str
    target: str
    done: int
    total: int
    message: str = ""


@dataclass
class EvalRequest(Record):
    """`POST /v1/changes/{rev}/eval`, `POST /v1/pending/{id}/eval`."""

    scenarios: list[str] | None = None  # these scenarios by name (None: every one)
    repeat: int | None = None  # runs of each scenario at each version (the config's evals_repeat when None)
    turns: int | None = None  # re-ask the last N user turns instead of running the scenarios
    project: str | None = None  # the opencode project naming the agent's provider and model
    wait: bool = False  # answer when it has finished


@dataclass
class EvalCancelled(Record):
    id: str
    cancelled: bool = True
