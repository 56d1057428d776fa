"""The stages of the hook protocols, and every fact about each one, in one table.

evolve speaks two protocols at once (docs/hooks.md, "Two protocols"): the original opencode-evolve
protocol, and hcp (version 3), its successor with canonical stage names and response keys that block or
change what happens. Each hook is treated as one of them; both share most stage names.

`ROWS` has one row a stage: its name in each protocol, its hcp tier, who fires it, what its failure
starts, whether it carries a session, how it is journaled, whether a replay contains it, what the
console offers for it. The names the engine and the console read (`LEGACY_STAGES`, `NO_RECOVER`, …)
are derived from it, so that a new stage is one row; tests/unit/engine/test_stages.py fails while a stage has none
or a row is not whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final


class Stage(StrEnum):
    DISCOVER = "discover"
    MUTATE_REQUEST = "mutate_request"
    OBSERVE_MESSAGE = "observe_message"
    IDLE = "idle"
    HEARTBEAT = "heartbeat"
    COMPACTING = "compacting"
    FORMAT_NOTIFICATION = "format_notification"
    RECOVER = "recover"
    EXECUTE_TOOL = "execute_tool"
    TOOL_BEFORE = "tool_before"
    TOOL_AFTER = "tool_after"
    # hcp's canonical names
    BEFORE_TOOL = "before_tool"
    AFTER_TOOL = "after_tool"
    BEFORE_TURN = "before_turn"
    AFTER_TURN = "after_turn"
    BEFORE_STOP = "before_stop"
    ON_ERROR = "on_error"
    ON_PERMISSION = "on_permission"


class HookProtocol(StrEnum):
    """The protocol a hook is treated as."""

    OPENCODE_EVOLVE = "opencode-evolve"
    HCP = "hcp"


class FiredBy(StrEnum):
    """Who fires a stage in the course of things. Any stage can also be fired by hand (`evolve stage`,
    `POST /v1/stages/{stage}`, the console's "run a stage" dialog)."""

    OPENCODE = "opencode"  # opencode's hooks and events, through the shim
    HEARTBEAT = "heartbeat"  # the engine's heartbeat, on its timer or fired by the operator
    ENGINE = "engine"  # the engine itself: discovery, a failed stage, the notifications hooks ask for


class Replay(StrEnum):
    """What a replay of a change does with a stage (docs/cli.md, "evolve replay")."""

    CONTAINED = "contained"
    """Replayed by default: its result is what the agent sees, and a hook is not expected to act on
    the world in it."""
    UNCONTAINED = "uncontained"
    """Replayed only when asked for by name, with a warning: its hooks may act outside the workspace
    copy (they watch the agent, guard its tool calls, or run a tool)."""


# Who has a name: both protocols, or one of them.
_SHARED: Final = frozenset(HookProtocol)
_OPENCODE_EVOLVE: Final = frozenset({HookProtocol.OPENCODE_EVOLVE})
_HCP: Final = frozenset({HookProtocol.HCP})


@dataclass(frozen=True, kw_only=True)
class StageFacts:
    """One stage's row. Every fact but the last two must be given: a new stage cannot leave one out."""

    stage: Stage
    protocols: frozenset[HookProtocol]
    """The protocols whose hooks get this name."""
    counterpart: Stage | None
    """For a name only one protocol has: the other protocol's name for the same moment (idle and
    before_stop, tool_before and before_tool, tool_after and after_tool), if it has one."""
    hcp_tier: int | None
    """hcp's tier: 0 universal, 1 loop-aware, 2 interception, 3 host extensions; None where hcp does
    not have the name."""
    fired_by: FiredBy
    under_run: bool
    """Fired for the sessions of `opencode run`, which refuses every `ask` permission itself at once."""
    recovers: bool
    """A failed run starts `recover`. Not for the observational stages, recover itself, the stages not
    dispatched to every hook, and hcp's loop stages, whose failure only means the hook had no say
    (docs/hooks.md, "When a hook fails: recover")."""
    sessionless: bool
    """Its input never carries a session's history."""
    own_dispatch: bool
    """Journaled as a dispatch of its own. recover runs inside the dispatch that failed, and
    execute_tool goes to one hook without a dispatch: their recorded inputs are hook runs."""
    replay: Replay
    ends_turn: bool
    """It comes when an agent's turn ends (its loop stops), so the runs of one turn lie between two of
    its runs."""
    results: Mapping[str, str] = field(default_factory=dict)
    """What a key of its merged result is to the agent, as a replay names a difference; a key not
    listed is named as it is."""
    template: Mapping[str, Any] | None = None
    """The input the console's "run a stage by hand" dialog starts with; None: not in its menu."""


ROWS: Final[tuple[StageFacts, ...]] = (
    # opencode-evolve's stages, in the order docs/hooks.md lists them
    StageFacts(
        stage=Stage.DISCOVER,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=0,
        fired_by=FiredBy.ENGINE,
        under_run=True,
        recovers=False,
        sessionless=True,
        own_dispatch=True,
        replay=Replay.CONTAINED,
        ends_turn=False,
        results={"tools": "tools registered", "registration": "registration (name, test, stages)"},
    ),
    StageFacts(
        stage=Stage.MUTATE_REQUEST,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=0,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=True,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.CONTAINED,
        ends_turn=False,
        results={"system": "system prompt"},
        template={"session": {"id": "manual"}, "system": ["You are opencode."]},
    ),
    StageFacts(
        stage=Stage.OBSERVE_MESSAGE,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=3,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
        template={
            "session": {"id": "manual", "agent": "build"},
            "thinking": "",
            "calls": [],
            "answer": "hello",
        },
    ),
    StageFacts(
        stage=Stage.IDLE,
        protocols=_OPENCODE_EVOLVE,
        counterpart=Stage.BEFORE_STOP,
        hcp_tier=None,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=True,
        results={"continue": "continuation message"},
        template={"session": {"id": "manual", "agent": "build"}, "answer": "done"},
    ),
    StageFacts(
        stage=Stage.HEARTBEAT,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=3,
        fired_by=FiredBy.HEARTBEAT,
        under_run=True,
        recovers=True,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.CONTAINED,
        ends_turn=False,
        results={"system": "heartbeat system prompt", "user": "heartbeat message"},
        template={"sessions": []},
    ),
    StageFacts(
        stage=Stage.COMPACTING,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=3,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.CONTAINED,
        ends_turn=False,
        results={"prompt": "compaction prompt"},
        template={"session": {"id": "manual"}},
    ),
    StageFacts(
        stage=Stage.FORMAT_NOTIFICATION,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=3,
        fired_by=FiredBy.ENGINE,
        under_run=True,
        recovers=False,
        sessionless=True,
        own_dispatch=True,
        replay=Replay.CONTAINED,
        ends_turn=False,
        results={"message": "notification text"},
        template={"notifications": ["something happened"]},
    ),
    StageFacts(
        stage=Stage.RECOVER,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=3,
        fired_by=FiredBy.ENGINE,
        under_run=True,
        recovers=False,
        sessionless=True,
        own_dispatch=False,
        replay=Replay.CONTAINED,
        ends_turn=False,
        results={"system": "recover system prompt", "user": "recover message"},
        template={"error": "exit 1", "failed_hook": "mutate_request"},
    ),
    StageFacts(
        stage=Stage.EXECUTE_TOOL,
        protocols=_SHARED,
        counterpart=None,
        hcp_tier=0,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=False,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
        results={"result": "tool result"},
    ),
    StageFacts(
        stage=Stage.TOOL_BEFORE,
        protocols=_OPENCODE_EVOLVE,
        counterpart=Stage.BEFORE_TOOL,
        hcp_tier=None,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
        template={"session": {"id": "manual"}, "tool": "read", "callID": "manual", "args": {}},
    ),
    StageFacts(
        stage=Stage.TOOL_AFTER,
        protocols=_OPENCODE_EVOLVE,
        counterpart=Stage.AFTER_TOOL,
        hcp_tier=None,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
        template={"session": {"id": "manual"}, "tool": "read", "callID": "manual", "title": "", "output": ""},
    ),
    # the names only hcp has
    StageFacts(
        stage=Stage.BEFORE_TOOL,
        protocols=_HCP,
        counterpart=Stage.TOOL_BEFORE,
        hcp_tier=0,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
    ),
    StageFacts(
        stage=Stage.AFTER_TOOL,
        protocols=_HCP,
        counterpart=Stage.TOOL_AFTER,
        hcp_tier=0,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
    ),
    StageFacts(
        stage=Stage.BEFORE_TURN,
        protocols=_HCP,
        counterpart=None,
        hcp_tier=1,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
    ),
    StageFacts(
        stage=Stage.AFTER_TURN,
        protocols=_HCP,
        counterpart=None,
        hcp_tier=1,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
    ),
    StageFacts(
        stage=Stage.BEFORE_STOP,
        protocols=_HCP,
        counterpart=Stage.IDLE,
        hcp_tier=1,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=True,
        results={"continue": "continuation message"},
    ),
    StageFacts(
        stage=Stage.ON_ERROR,
        protocols=_HCP,
        counterpart=None,
        hcp_tier=1,
        fired_by=FiredBy.OPENCODE,
        under_run=True,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
    ),
    StageFacts(
        stage=Stage.ON_PERMISSION,
        protocols=_HCP,
        counterpart=None,
        hcp_tier=2,
        fired_by=FiredBy.OPENCODE,
        under_run=False,
        recovers=False,
        sessionless=False,
        own_dispatch=True,
        replay=Replay.UNCONTAINED,
        ends_turn=False,
    ),
)

FACTS: Final[Mapping[Stage, StageFacts]] = {row.stage: row for row in ROWS}
"""Each stage's row."""


# ---- derived from the table --------------------------------------------------------------------------

STAGES: Final = tuple(row.stage.value for row in ROWS)
"""Every stage name of either protocol: opencode-evolve's, then those only hcp has."""

LEGACY_STAGES: Final = tuple(row.stage for row in ROWS if HookProtocol.OPENCODE_EVOLVE in row.protocols)
"""The opencode-evolve protocol's stage names, in the order the documentation lists them."""

HCP_STAGES: Final = tuple(
    stage
    for _, _, stage in sorted(
        (row.hcp_tier, index, row.stage) for index, row in enumerate(ROWS) if row.hcp_tier is not None
    )
)
"""hcp's canonical stage names, tier by tier (0 to 3), each tier in the table's order."""

LEGACY_ONLY: Final = frozenset(LEGACY_STAGES) - frozenset(HCP_STAGES)
"""Names only opencode-evolve has: idle, tool_before, tool_after."""

HCP_ONLY: Final = frozenset(HCP_STAGES) - frozenset(LEGACY_STAGES)
"""Names only hcp has: before_tool, after_tool, before_turn, after_turn, before_stop, on_error,
on_permission."""

LEGACY_NAME: Final = {
    row.stage: row.counterpart for row in ROWS if row.stage in HCP_ONLY and row.counterpart is not None
}
"""An hcp stage and the opencode-evolve stage that is its older form."""

HCP_NAME: Final = {legacy: canonical for canonical, legacy in LEGACY_NAME.items()}

HCP_FIRED: Final = HCP_STAGES
"""The canonical stages evolve fires for hcp hooks on opencode 1.18 (every one; what each can do there
is in docs/hooks.md, "Conformance")."""

NOT_FIRED_UNDER_RUN: Final = frozenset(row.stage for row in ROWS if not row.under_run)
"""Stages not fired for sessions of `opencode run`, which refuses every `ask` permission itself at once."""

NO_RECOVER: Final = frozenset(row.stage for row in ROWS if not row.recovers)
"""Stages whose failures do not start `recover` (StageFacts.recovers)."""

SESSIONLESS: Final = frozenset(row.stage for row in ROWS if row.sessionless)
"""Stages whose input never carries a session's history."""
