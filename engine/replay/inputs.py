"""What a replay replays: the stages a change can affect, and the journal's most recent recorded inputs
of each stage."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from engine.hooks.discovery import Registration
from engine.journal.store import Journal, JournalFailing
from engine.protocol.stages import ROWS, SESSIONLESS, STAGES, Replay, Stage

CONTAINED: Final[tuple[str, ...]] = tuple(row.stage for row in ROWS if row.replay is Replay.CONTAINED)
"""The stages replayed by default: their result is what the agent sees, and a hook is not expected to
act on the world in them (engine.protocol.stages, StageFacts.replay)."""

UNCONTAINED: Final[tuple[str, ...]] = tuple(row.stage for row in ROWS if row.replay is Replay.UNCONTAINED)
"""Stages whose hooks may act outside the workspace: replayed only when asked for by name."""

UNCONTAINED_WARNING: Final = (
    "{stages}: replayed because you asked; a hook's side effects outside the workspace copy "
    "(files elsewhere, the network, processes it starts, messages it sends) are not contained"
)

# Stages whose recorded inputs are hook runs, not dispatches (StageFacts.own_dispatch).
FROM_RUNS: Final = frozenset(row.stage for row in ROWS if not row.own_dispatch)
CANDIDATES: Final = 400  # recorded inputs looked at per stage, to find distinct sessions


class UnknownStage(ValueError):
    """A stage name that is not one of the protocol's."""


def check_stages(stages: Iterable[str]) -> list[str]:
    """The stages asked for, each once, in the order given; an unknown name raises UnknownStage."""
    out: list[str] = []
    for stage in stages:
        if stage not in STAGES:
            raise UnknownStage(f"unknown stage {stage!r}; stages: {', '.join(STAGES)}")
        if stage not in out:
            out.append(stage)
    return out


def affected_stages(
    files: Sequence[str], versions: Sequence[tuple[Path, dict[str, Registration]]]
) -> tuple[list[str], list[str]]:
    """The contained stages a change to `files` can affect, and notes on what is left out.

    A hook's change affects discover and the stages that hook handles (in any of the `versions`: the
    copy's root and its registrations by hook file); a prompt, every stage but discover (every stage's
    input carries the prompts); the config or any other file, every stage (hooks may read any file of
    the workspace); tests/, nothing (only validation reads them)."""
    wanted: set[str] = set()
    left_out: set[str] = set()
    notes: list[str] = []
    for rel in files:
        top = rel.split("/", 1)[0]
        if top == "tests":
            continue
        if top == "prompts":
            wanted.update(s for s in CONTAINED if s != Stage.DISCOVER)
            continue
        if top != "hooks":
            wanted.update(CONTAINED)
            continue
        regs = [reg for root, found in versions for reg in _registrations_of(root, rel, found)]
        if not regs:
            # Not a hook itself (a module hooks import, a data file): any hook may use it.
            wanted.update(CONTAINED)
            continue
        wanted.add(Stage.DISCOVER)
        for reg in regs:
            handled = set(STAGES) if reg.stages is None else set(reg.stages)
            wanted.update(s for s in CONTAINED if s in handled)
            left_out.update(s for s in UNCONTAINED if s in handled)
    if left_out:
        names = ", ".join(s for s in UNCONTAINED if s in left_out)
        notes.append(
            f"not replayed: {names} (the changed hooks handle them, but a hook may act outside the "
            "workspace copy there); ask for them by name to replay them"
        )
    return [s for s in CONTAINED if s in wanted], notes


def _registrations_of(root: Path, rel: str, found: dict[str, Registration]) -> list[Registration]:
    """The hooks of a version whose content is the file `rel` (also through a link)."""
    real = os.path.realpath(root / rel)
    return [reg for reg in found.values() if os.path.realpath(reg.file.path) == real]


@dataclass
class Recorded:
    """One recorded input of a stage, as the engine dispatched it."""

    source: str  # the dispatch's id (a run's, for recover and execute_tool)
    at: float
    session: str | None
    context: dict[str, Any]
    history: list[Any] | None  # the session's history as the hooks got it
    hook: str | None = None  # execute_tool: the hook the call went to


def recorded_inputs(journal: Journal, stage: str, limit: int) -> list[Recorded]:
    """The most recent recorded inputs of `stage`, at most `limit`, newest first: the newest of each
    session first, then the newest of the rest."""
    if limit <= 0:
        return []
    # What was dispatched a moment ago counts too; a journal that cannot write now (a full disk)
    # still has what it had.
    with contextlib.suppress(TimeoutError, JournalFailing):
        journal.flush()
    found = _from_runs(journal, stage) if stage in FROM_RUNS else _from_dispatches(journal, stage)
    return choose(found, limit)


def choose(found: Sequence[Recorded], limit: int) -> list[Recorded]:
    """Distinct sessions first (the newest input of each), then the newest others; newest first."""
    seen: set[str | None] = set()
    first: list[Recorded] = []
    rest: list[Recorded] = []
    for item in sorted(found, key=lambda r: r.at, reverse=True):
        (rest if item.session in seen else first).append(item)
        seen.add(item.session)
    picked = (first + rest)[:limit]
    return sorted(picked, key=lambda r: r.at, reverse=True)


def _context_of(payload: dict[str, Any]) -> dict[str, Any]:
    """A hook's stdin document without what the dispatch adds itself (engine.dispatch.build_input)."""
    return {k: v for k, v in payload.items() if k not in ("hook", "prompts", "history")}


def _history(stage: str, session: str | None, history: Any) -> list[Any] | None:
    if session is None or stage in SESSIONLESS:
        return None
    return history if isinstance(history, list) else []


def _from_dispatches(journal: Journal, stage: str) -> list[Recorded]:
    out: list[Recorded] = []
    for dispatch in journal.dispatches(stage=stage, limit=CANDIDATES):
        history: Any = None
        if dispatch.session is not None and stage not in SESSIONLESS:
            runs = journal.runs(dispatch_id=dispatch.id, limit=1)
            if runs:
                history = runs[0].input.get("history")
        out.append(
            Recorded(
                source=dispatch.id,
                at=dispatch.started_at,
                session=dispatch.session,
                context=dict(dispatch.context),
                history=_history(stage, dispatch.session, history),
            )
        )
    return out


def _from_runs(journal: Journal, stage: str) -> list[Recorded]:
    out: list[Recorded] = []
    seen: set[str] = set()
    for run in journal.runs(stage=stage, limit=CANDIDATES):
        # recover runs once per hook in the same dispatch: one input per dispatch
        key = run.dispatch_id if stage == Stage.RECOVER and run.dispatch_id else run.id
        if key in seen:
            continue
        seen.add(key)
        payload = run.input if isinstance(run.input, dict) else {}
        out.append(
            Recorded(
                source=run.id,
                at=run.started_at,
                session=run.session,
                context=_context_of(payload),
                history=_history(stage, run.session, payload.get("history")),
                hook=run.hook if stage == Stage.EXECUTE_TOOL else None,
            )
        )
    return out
