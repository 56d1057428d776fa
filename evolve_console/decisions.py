"""The operator's decisions on a change: approve it, revert it (refreshing the sessions frozen under
it, reverting later changes together with it), reject a held one with a reason, or dismiss one that
went stale. Each makes the engine's API call and returns what the operator is told; the app asks
first (the dialogs) and shows the answer."""

from __future__ import annotations

from dataclasses import dataclass

from engine.protocol import calls
from engine.protocol.records import Impact

from .client import EngineClient, EngineError
from .format import short
from .model import ChangeEntry
from .screens import RevertChoice
from .threeway import ThreeWay


@dataclass(frozen=True)
class Outcome:
    """What the operator is told of a decision; `refused` when the engine would not make it (an
    error, to be read whole); `three`: an approval refused because the file changed under the held
    change, with the three versions to compare."""

    text: str
    refused: bool = False
    three: ThreeWay | None = None


def approve_question(change: ChangeEntry) -> tuple[str, str] | None:
    """The question (and its detail) to confirm before approving `change`: only a reverted change
    asks, since approving it does not bring it back."""
    if change.state != "reverted":
        return None
    return (
        f"Approve “{short(change.subject, 50)}”, which was reverted?",
        f"It was undone by {str(change.reverted_by)[:10]}; approving it records that you "
        "looked at it and found it good. It stays reverted.",
    )


async def approve(client: EngineClient, change: ChangeEntry) -> Outcome:
    """Approve `change`: a held change is installed, a commit gets its approval noted. A held change
    whose file changed since it was proposed is refused, with the three versions; another refusal
    is raised (the operator is told it as any failed command)."""
    if change.pending_id:
        try:
            await client.send(calls.approve_pending(change.pending_id))
        except EngineError as exc:
            three = ThreeWay.of(str(exc), exc.details)
            if three is None:
                raise
            return Outcome(str(exc), refused=True, three=three)
        return Outcome(f"approved and installed: {change.subject}")
    await client.send(calls.approve(change.key))
    return Outcome(f"approved {change.key[:10]}: {change.subject}")


def revert_question(change: ChangeEntry) -> str:
    return f"Revert {change.key[:10]} “{short(change.subject, 60)}”?"


async def revert_impact(client: EngineClient, change: ChangeEntry) -> Impact:
    """What reverting `change` touches: the sessions frozen under it, the later changes to its files
    (and the sessions frozen under those)."""
    return await client.send(calls.impact(change.key))


async def revert(client: EngineClient, change: ChangeEntry, choice: RevertChoice) -> Outcome:
    """Revert `change` as the operator chose; refused (a conflict with later changes, say) with the
    engine's explanation."""
    try:
        result = await client.send(calls.revert(change.key, refresh=choice.refresh, together=choice.together))
    except EngineError as exc:
        return Outcome(f"revert refused: {exc}", refused=True)
    also = f", {len(result.refreshed)} session(s) refreshed" if result.refreshed else ""
    return Outcome(f"reverted {change.key[:10]} with {result.sha[:10]}{also}")


async def reject(client: EngineClient, change: ChangeEntry, reason: str) -> str:
    """Reject the held `change`; an empty `reason` is none."""
    await client.send(calls.reject_pending(str(change.pending_id), reason or None))
    return f"rejected: {change.subject}"


async def dismiss(client: EngineClient, change: ChangeEntry, reason: str) -> str:
    """Set aside the held `change` that went stale; an empty `reason` is none."""
    await client.send(calls.dismiss_pending(str(change.pending_id), reason or None))
    return f"dismissed: {change.subject}"
