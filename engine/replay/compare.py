"""What a replayed stage gave the agent, and how the version after a change differs from the version
before it, field by field, with what varies from run to run left out (engine.worddiff)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from engine.protocol.records import FieldDiff, InputComparison, StageComparison
from engine.protocol.stages import ROWS
from engine.replay import worddiff
from engine.replay.clock import Window

SYSTEM_SEPARATOR: Final = "\n──── next system message ────\n"
FIELD_LIMIT: Final = 200_000  # characters of one field compared; the rest is cut (and says so)

# What a result's key is to the agent, per stage (StageFacts.results); other keys are shown by name.
LABELS: Final[dict[tuple[str, str], str]] = {
    (row.stage.value, key): name for row in ROWS for key, name in row.results.items()
}


def label(stage: str, key: str) -> str:
    if stage == "discover" and key.startswith("tool "):
        # The field is the tool's whole registration; what in it changed shows in the text.
        return f"{key} (its description, parameters and permission)"
    return LABELS.get((stage, key), key)


@dataclass
class Outcome:
    """One recorded input played with one version: what the agent gets, or the runs that failed."""

    view: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def _strings(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(s, str) for s in value)


def agent_view(
    stage: str, merged: dict[str, Any], context: dict[str, Any], prompts: dict[str, str]
) -> dict[str, Any]:
    """The merged result as the agent meets it: where the hooks give nothing, the engine's fallback
    (opencode's own system prompt, prompts/compaction.md, prompts/heartbeat.md) is what it gets."""
    view = dict(merged)
    if stage == "mutate_request" and not _strings(view.get("system")):
        # The hooks abstained: opencode keeps the system prompt it sent (engine.bridge).
        if _strings(context.get("system")):
            view["system"] = context["system"]
        else:
            view.pop("system", None)
    elif stage == "compacting" and not (isinstance(view.get("prompt"), str) and view["prompt"]):
        fallback = prompts.get("compaction") or ""
        if fallback:
            view["prompt"] = fallback
        else:
            view.pop("prompt", None)
    elif stage == "heartbeat" and not (isinstance(view.get("user"), str) and view["user"]):
        fallback = (prompts.get("heartbeat") or "").strip()
        if fallback:
            view["user"] = fallback
        else:
            view.pop("user", None)
    return view


def as_text(key: str, value: Any) -> str:
    """A field as text to compare: strings as they are, system messages one after the other,
    anything else as indented JSON with sorted keys."""
    if isinstance(value, str):
        text = value
    elif key == "system" and _strings(value):
        text = SYSTEM_SEPARATOR.join(value)
    else:
        text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) > FIELD_LIMIT:
        text = text[:FIELD_LIMIT] + f"\n[… cut at {FIELD_LIMIT:,} characters for the comparison]"
    return text


def _text(view: dict[str, Any], key: str) -> str | None:
    return as_text(key, view[key]) if key in view else None


def compare_input(
    stage: str,
    source: str,
    before: Outcome,
    again: Outcome,
    after: Outcome,
    *,
    recorded_at: float | None = None,
    session: str | None = None,
    clock: Window | None = None,
) -> InputComparison:
    """`after` against `before`; what differs between `before` and `again` (the same version run
    twice) is volatile and does not count as a change, nor does a moment of `clock` (when the runs
    happened: a time the hooks read from the clock). A failed run makes the input `failed`: its
    result is the recovered one, and a failure is not a difference."""
    errors_before = before.errors + [e for e in again.errors if e not in before.errors]
    found = InputComparison(source=source, status="unchanged", recorded_at=recorded_at, session=session)
    if errors_before or after.errors:
        found.status = "failed"
        found.errors_before, found.errors_after = errors_before, list(after.errors)
        return found
    for key in dict.fromkeys([*before.view, *again.view, *after.view]):
        first, second, new = _text(before.view, key), _text(again.view, key), _text(after.view, key)
        name = label(stage, key)
        noise: worddiff.Volatile | None = None
        if first != second:
            found.volatile.append(name)
            if first is None or second is None:
                continue  # there in one run, not in the other: the whole field comes and goes
            noise = worddiff.volatile(first, second)
        if first == new:
            continue
        if first is None or new is None:
            segments = [["+", new]] if new else ([["-", first]] if first else [])
            found.diffs.append(
                FieldDiff(key, name, segments, before_absent=first is None, after_absent=new is None)
            )
            continue
        changed, segments = worddiff.compare(first, new, noise, clock)
        if changed:
            found.diffs.append(FieldDiff(key, name, segments))
        elif name not in found.volatile:
            found.volatile.append(name)  # it differs by the clock alone
    found.status = "changed" if found.diffs else "unchanged"
    return found


def stage_comparison(
    stage: str, found: Sequence[InputComparison], note: str | None = None
) -> StageComparison:
    """The figures of a stage from its inputs' comparisons."""
    return StageComparison(
        stage=stage,
        inputs=len(found),
        changed=sum(c.status == "changed" for c in found),
        unchanged=sum(c.status == "unchanged" for c in found),
        failed=sum(c.status == "failed" for c in found),
        failed_before=sum(bool(c.errors_before) for c in found),
        failed_after=sum(bool(c.errors_after) for c in found),
        volatile=sorted({v for c in found for v in c.volatile}),
        note=note,
        comparisons=list(found),
    )
