"""The table of stage facts (engine.protocol.stages): one whole row for every stage, consistent with
itself, and what the engine, replay and the console derive from it."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from engine.hooks.protocols import fired_stages
from engine.protocol.stages import (
    FACTS,
    HCP_NAME,
    HCP_STAGES,
    LEGACY_NAME,
    LEGACY_ONLY,
    LEGACY_STAGES,
    NO_RECOVER,
    NOT_FIRED_UNDER_RUN,
    ROWS,
    SESSIONLESS,
    STAGES,
    FiredBy,
    HookProtocol,
    Replay,
    Stage,
    StageFacts,
)
from engine.replay.compare import label
from engine.replay.inputs import CONTAINED, FROM_RUNS, UNCONTAINED
from tests.support.environment import REPO

# Facts for which None is an answer; every other fact must be given.
MAY_BE_NONE = {"counterpart", "hcp_tier", "template"}


def problems(rows: Sequence[StageFacts]) -> list[str]:
    """What is wrong with a table: a stage without a row or with two, a row of a name that is no
    stage, a fact left out or of the wrong kind, names of the two protocols that do not match."""
    found: list[str] = []
    seen = [row.stage for row in rows]
    for stage in Stage:
        if seen.count(stage) != 1:
            found.append(f"{stage.value}: {seen.count(stage)} rows")
    by_stage = {row.stage: row for row in rows}
    for row in rows:
        if not isinstance(row.stage, Stage):
            found.append(f"{row.stage!r}: a row for a name that is no stage")
            continue
        name = row.stage.value
        for fact in dataclasses.fields(row):
            if getattr(row, fact.name) is None and fact.name not in MAY_BE_NONE:
                found.append(f"{name}: no {fact.name}")
        for fact, kind in (
            ("fired_by", FiredBy),
            ("replay", Replay),
            ("under_run", bool),
            ("recovers", bool),
            ("sessionless", bool),
            ("own_dispatch", bool),
            ("ends_turn", bool),
        ):
            if not isinstance(getattr(row, fact), kind):
                found.append(f"{name}: {fact} is not a {kind.__name__}")
        if not row.protocols or not all(isinstance(p, HookProtocol) for p in row.protocols):
            found.append(f"{name}: no protocol")
        has_hcp = HookProtocol.HCP in row.protocols
        if has_hcp != (row.hcp_tier in (0, 1, 2, 3)):
            found.append(
                f"{name}: hcp tier {row.hcp_tier!r} for protocols {sorted(p.value for p in row.protocols)}"
            )
        if not all(isinstance(k, str) and isinstance(v, str) and v for k, v in row.results.items()):
            found.append(f"{name}: a result label that is not a text")
        if row.template is not None and not isinstance(row.template, dict):
            found.append(f"{name}: a template that is not an object")
        if row.counterpart is not None:
            other = by_stage.get(row.counterpart)
            if other is None:
                found.append(f"{name}: counterpart {row.counterpart.value} has no row")
            elif other.counterpart != row.stage or other.protocols & row.protocols or len(row.protocols) != 1:
                found.append(
                    f"{name}: counterpart {row.counterpart.value} is not its form in the other protocol"
                )
    return found


def test_every_stage_has_one_whole_row_and_the_names_of_both_protocols_match() -> None:
    assert problems(ROWS) == []
    assert set(FACTS) == set(Stage) and list(FACTS) == [row.stage for row in ROWS]


def test_a_stage_without_a_row_or_a_row_not_whole_is_found() -> None:
    after_tool = FACTS[Stage.AFTER_TOOL]
    assert problems([row for row in ROWS if row is not after_tool]) == [
        "after_tool: 0 rows",
        "tool_after: counterpart after_tool has no row",
    ]
    assert "after_tool: 2 rows" in problems([*ROWS, after_tool])
    bogus = dataclasses.replace(after_tool, stage="after_tools")  # type: ignore[arg-type]
    assert "'after_tools': a row for a name that is no stage" in problems([*ROWS, bogus])
    for change, wanted in (
        ({"replay": None}, "after_tool: no replay"),
        ({"fired_by": "opencode"}, "after_tool: fired_by is not a FiredBy"),
        ({"hcp_tier": None}, "after_tool: hcp tier None for protocols ['hcp']"),
        ({"counterpart": Stage.IDLE}, "after_tool: counterpart idle is not its form in the other protocol"),
        ({"protocols": frozenset()}, "after_tool: no protocol"),
    ):
        broken = [dataclasses.replace(r, **change) if r is after_tool else r for r in ROWS]
        assert wanted in problems(broken), change


def test_a_stage_and_its_form_in_the_other_protocol_are_treated_alike() -> None:
    """The same moment under another name: replayed, recovered, journaled and ending turns alike."""
    assert LEGACY_NAME == {
        Stage.BEFORE_STOP: Stage.IDLE,
        Stage.BEFORE_TOOL: Stage.TOOL_BEFORE,
        Stage.AFTER_TOOL: Stage.TOOL_AFTER,
    }
    assert dict(HCP_NAME) == {legacy: canonical for canonical, legacy in LEGACY_NAME.items()}
    for canonical, legacy in LEGACY_NAME.items():
        a, b = FACTS[canonical], FACTS[legacy]
        same = ("fired_by", "replay", "recovers", "sessionless", "own_dispatch", "ends_turn")
        assert [getattr(a, f) for f in same] == [getattr(b, f) for f in same], (canonical, legacy)


def test_the_names_derived_from_the_table() -> None:
    assert STAGES[:11] == tuple(s.value for s in LEGACY_STAGES)
    assert set(LEGACY_ONLY) == {Stage.IDLE, Stage.TOOL_BEFORE, Stage.TOOL_AFTER}
    assert len(HCP_STAGES) == 15 and set(HCP_STAGES) == set(Stage) - LEGACY_ONLY
    tiers = [FACTS[s].hcp_tier or 0 for s in HCP_STAGES]
    assert tiers == sorted(tiers), "hcp's names tier by tier"
    assert set(Stage) - NO_RECOVER == {Stage.MUTATE_REQUEST, Stage.HEARTBEAT}
    assert set(SESSIONLESS) == {Stage.DISCOVER, Stage.RECOVER, Stage.FORMAT_NOTIFICATION}
    assert set(NOT_FIRED_UNDER_RUN) == {Stage.ON_PERMISSION}
    assert "on_permission" not in fired_stages("run") and "heartbeat" not in fired_stages(heartbeat=False)
    assert set(fired_stages()) == set(HCP_STAGES)


def test_replay_reads_the_table() -> None:
    assert CONTAINED == (
        "discover",
        "mutate_request",
        "heartbeat",
        "compacting",
        "format_notification",
        "recover",
    )
    assert set(UNCONTAINED) == set(Stage) - set(CONTAINED)
    assert set(FROM_RUNS) == {Stage.RECOVER, Stage.EXECUTE_TOOL}
    assert label("idle", "continue") == label("before_stop", "continue") == "continuation message"
    assert label("before_tool", "args") == "args", "a key without a label is named as it is"


def test_the_docs_name_the_stages_a_replay_leaves_out_by_default() -> None:
    """docs/cli.md (`--stage`) and docs/console.md ("What is replayed") list every uncontained stage."""
    for page, sentence in (
        ("docs/cli.md", r"affect\. (.*?) are replayed only this way"),
        ("docs/console.md", r"only, none\.\n(.*?) are not\s+replayed here"),
    ):
        text = (REPO / page).read_text(encoding="utf-8")
        found = re.search(sentence, text, re.S)
        assert found, page
        assert set(re.findall(r"`([a-z_]+)`", found.group(1))) == set(UNCONTAINED), page
