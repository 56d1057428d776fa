"""hcp, the successor of the opencode-evolve hook protocol, as evolve hosts it next to the original:
which protocol a hook is treated as and why, the stages each protocol gets, the base payload of hcp
(`hook`, `session`, `host`, `cwd`), the check of a hook's declared stages, and how an hcp hook's answer
is folded into a stage's merged result (docs/hooks.md, "Two protocols").
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from engine.hooks.discovery import Registration
from engine.hooks.hooktext import file_stages
from engine.protocol.stages import (
    FACTS,
    HCP_FIRED,
    HCP_NAME,
    HCP_ONLY,
    HCP_STAGES,
    LEGACY_NAME,
    LEGACY_ONLY,
    LEGACY_STAGES,
    NOT_FIRED_UNDER_RUN,
    SESSIONLESS,
    FiredBy,
    HookProtocol,
    Stage,
)

HOST_NAME: Final = "evolve"
HCP_VERSION: Final = 3
PROTOCOL_KEY: Final = "protocol"  # evolve's own discover key: a hook may say which protocol it speaks

SYSTEM_APPEND: Final = "system_append"
"""The merged key of mutate_request's `system` parts that are appended to opencode's prompt."""
DECISIONS: Final = "decisions"
"""The merged key of on_permission's decisions, one per hook (a deny anywhere wins)."""
MESSAGES: Final = "messages"
"""The merged key of format_notification's messages that are delivered each on its own."""


CONFIG_FILE: Final = "config/evolve.jsonc"


@dataclass(frozen=True)
class ProtocolChoice:
    """The protocol a hook is treated as, and why. `settle` is set when the evidence was ambiguous:
    the one line of config that settles the choice (docs/hooks.md, "Two protocols")."""

    protocol: HookProtocol
    reason: str
    settle: str | None = None


def settle_line(file: str) -> str:
    """The config line that settles an ambiguous choice for the hook `file`."""
    return (
        f'add "hook_protocols": {{"{file}": "hcp"}} to {CONFIG_FILE} '
        '(or "opencode-evolve" to keep this choice)'
    )


def _names(stages: Collection[str]) -> str:
    return ", ".join(sorted(stages))


def choose_protocol(
    file: str,
    declared: Collection[str] | None,
    answered: str | None,
    configured: Mapping[str, str],
    named: Callable[[], Collection[str]] = frozenset,
) -> ProtocolChoice:
    """Which protocol the hook `file` is treated as, and why: the first rule that applies.

    1. the config (`hook_protocols`) names the file;
    2. its discover answer says `protocol`;
    3. it declares its stages: a name only hcp has makes it hcp, else opencode-evolve (shared names
       alone are ambiguous);
    4. it declares none: the stage names its file names (`named`, read only when this rule is
       reached): names only hcp has and none only opencode-evolve has make it hcp, and the other way
       round opencode-evolve;
    5. otherwise (both kinds, or neither) it is ambiguous: opencode-evolve, which sends a hook only
       names it can know (a hook that names both handles opencode-evolve's), with the config line
       that settles it.

    All of it costs the hook nothing: no stage is run to find out."""
    setting = configured.get(file)
    if setting is not None:
        return ProtocolChoice(HookProtocol(setting), f"hook_protocols in the config says {setting}")
    if answered is not None:
        return ProtocolChoice(HookProtocol(answered), f'its discover answer says "protocol": "{answered}"')
    if declared is not None:
        canonical = [s for s in declared if s in HCP_ONLY]
        if canonical:
            return ProtocolChoice(HookProtocol.HCP, f"it declares {_names(canonical)} (hcp stage names)")
        legacy = [s for s in declared if s in LEGACY_ONLY]
        if legacy:
            return ProtocolChoice(
                HookProtocol.OPENCODE_EVOLVE, f"it declares {_names(legacy)} (opencode-evolve stage names)"
            )
        return ProtocolChoice(
            HookProtocol.OPENCODE_EVOLVE,
            "its declared stages are names both protocols share (ambiguous; opencode-evolve, the "
            "original protocol)",
            settle_line(file),
        )
    found = frozenset(named())
    hcp_named, legacy_named = found & HCP_ONLY, found & LEGACY_ONLY
    if hcp_named and not legacy_named:
        return ProtocolChoice(
            HookProtocol.HCP,
            f"it declares no stages and its file names {_names(hcp_named)} (hcp stage names)",
        )
    if legacy_named and not hcp_named:
        return ProtocolChoice(
            HookProtocol.OPENCODE_EVOLVE,
            f"it declares no stages and its file names {_names(legacy_named)} (opencode-evolve stage names)",
        )
    if hcp_named and legacy_named:
        why = (
            f"it declares no stages and its file names both hcp stages ({_names(hcp_named)}) and "
            f"opencode-evolve ones ({_names(legacy_named)}) (ambiguous; opencode-evolve, whose names it handles)"
        )
    else:
        why = (
            "it declares no stages and its file names no stage only one protocol has (ambiguous; "
            "opencode-evolve, the original protocol, which never sends a hook a name it may not know)"
        )
    return ProtocolChoice(HookProtocol.OPENCODE_EVOLVE, why, settle_line(file))


def classify(reg: Registration, configured: Mapping[str, str]) -> Registration:
    """Set a registration's protocol, the reason (and the config line that settles an ambiguous
    choice), and the warnings about its declared stages."""
    choice = choose_protocol(
        reg.file.name,
        reg.stages,
        reg.answered_protocol,
        configured,
        lambda: file_stages(reg.file.path, HCP_ONLY | LEGACY_ONLY),
    )
    reg.protocol, reg.protocol_reason, reg.protocol_settle = choice.protocol, choice.reason, choice.settle
    reg.stage_warnings = stage_warnings(reg.protocol, reg.stages)
    return reg


def protocol_notice(reg: Registration) -> str | None:
    """The line that shows an ambiguous choice to the operator (the engine log, the status's
    config_warnings), None when the evidence decided."""
    if reg.protocol_settle is None:
        return None
    return f"hooks/{reg.file.name}: treated as {reg.protocol.value}: {reg.protocol_reason}; {reg.protocol_settle}"


def receives(protocol: HookProtocol, stage: str) -> bool:
    """Whether a hook of `protocol` is ever dispatched `stage`: each protocol gets its own names (an
    opencode-evolve hook never sees before_tool, an hcp hook never idle); a name neither protocol
    defines (a stage fired by hand) goes to both."""
    if protocol is HookProtocol.HCP:
        return stage not in LEGACY_ONLY
    return stage not in HCP_ONLY


def fired_stages(command: str | None = None, heartbeat: bool = True) -> list[str]:
    """`host.stages`: the canonical stages evolve fires for hcp hooks, for a session of an opencode
    started with `command` (None: not known, as for discover)."""
    out = []
    for stage in HCP_FIRED:
        if command == "run" and stage in NOT_FIRED_UNDER_RUN:
            continue
        if FACTS[stage].fired_by is FiredBy.HEARTBEAT and not heartbeat:
            continue
        out.append(stage.value)
    return out


def stage_warnings(protocol: HookProtocol, declared: Collection[str] | None) -> list[str]:
    """What is wrong with a hook's declared stages: names evolve does not know, and names of the other
    protocol."""
    if declared is None:
        return []
    warnings = []
    known = set(LEGACY_STAGES) | set(HCP_STAGES)
    for name in sorted(declared):
        if name not in known:
            warnings.append(f"declares stage {name!r}, which evolve does not know; it never runs for it")
        elif not receives(protocol, name):
            other = (
                HCP_NAME.get(Stage(name)) if protocol is HookProtocol.HCP else LEGACY_NAME.get(Stage(name))
            )
            hint = f"; use {other.value!r}" if other else ""
            warnings.append(f"declares stage {name!r}, which is not fired for {protocol.value} hooks{hint}")
    return warnings


def synthetic_session(stage: str) -> str:
    """The session id of an hcp payload when the stage has no session."""
    return f"evolve:{stage}"


def hcp_input(
    stage: str,
    prompts: Mapping[str, str],
    context: Mapping[str, Any],
    history: Sequence[Any] | None,
    *,
    session: str | None,
    host_stages: Sequence[str],
    cwd: str,
) -> dict[str, Any]:
    """The stdin document of an hcp hook: `{"hook", "session", "host", "cwd", "prompts", ...context,
    "history"?}`. `session` is the context's session object when it has one, else `{"id": session}`,
    else a synthetic id; `history` (from the context, else the session's) is left out of the stages
    that never carry one."""
    given = context.get("session")
    if isinstance(given, dict) and given.get("id"):
        session_obj = dict(given)
    else:
        session_obj = {"id": session or synthetic_session(stage)}
    payload: dict[str, Any] = {
        "hook": stage,
        "session": session_obj,
        "host": {"name": HOST_NAME, "version": HCP_VERSION, "stages": list(host_stages)},
        "cwd": cwd,
        "prompts": dict(prompts),
    }
    payload.update((k, v) for k, v in context.items() if k not in ("session", "hook", "host", "cwd"))
    if "history" not in context and history is not None and stage not in SESSIONLESS:
        payload["history"] = history
    return payload


def refusal(value: object, hook: str) -> str | None:
    """A `deny` (or `cancel`) value as the text the model reads: `{reason}`, a string, or any other
    truthy value (then a text naming the hook); None for a falsy one."""
    if isinstance(value, dict):
        reason = value.get("reason")
        return reason if isinstance(reason, str) and reason else f"refused by hooks/{hook}"
    if isinstance(value, str):
        return value or None
    return f"refused by hooks/{hook}" if value else None


def fold_answer(stage: str, protocol: HookProtocol, hook: str, result: dict[str, Any]) -> dict[str, Any]:
    """One hook's answer as it goes into the stage's merge.

    mutate_request: a `system` whose mode is append (the default of hcp hooks; `system_mode` says
    otherwise) is merged under `system_append`, so that it is added after opencode's prompt while a
    `system` that replaces (opencode-evolve's only mode) replaces it. format_notification: an hcp
    hook's message is kept on its own (`messages`, with the hook and its `to`), never joined with
    another hook's.
    """
    if stage == Stage.MUTATE_REQUEST:
        folded = {k: v for k, v in result.items() if k not in ("system_mode", "cancel")}
        if "cancel" in result:
            reason = refusal(result["cancel"], hook)
            if reason is not None:
                folded["cancel"] = reason
        if "system" in folded:
            mode = result.get("system_mode")
            if mode not in ("append", "replace"):
                mode = "append" if protocol is HookProtocol.HCP else "replace"
            if protocol is HookProtocol.HCP and isinstance(folded["system"], str):
                folded["system"] = [folded["system"]]
            if mode == "append":
                folded[SYSTEM_APPEND] = folded.pop("system")
        return folded
    if stage == Stage.BEFORE_TOOL and "deny" in result:
        reason = refusal(result["deny"], hook)
        folded = {k: v for k, v in result.items() if k != "deny"}
        if reason is not None:
            folded["deny"] = reason
        return folded
    for refused, key in ((Stage.AFTER_TURN, "stop"), (Stage.BEFORE_TURN, "skip")):
        if stage == refused and key in result:
            reason = refusal(result[key], hook)
            folded = {k: v for k, v in result.items() if k != key}
            if reason is not None:
                folded[key] = reason
            return folded
    if stage == Stage.ON_PERMISSION:
        folded = {k: v for k, v in result.items() if k not in ("decision", "reason")}
        decision = result.get("decision")
        if decision in ("allow", "deny", "ask"):
            reason = result.get("reason")
            folded[DECISIONS] = [
                {"hook": hook, "decision": decision, "reason": reason if isinstance(reason, str) else None}
            ]
        return folded
    if stage == Stage.FORMAT_NOTIFICATION and protocol is HookProtocol.HCP:
        folded = {k: v for k, v in result.items() if k not in ("message", "to")}
        message = result.get("message")
        if isinstance(message, str) and message:
            entry: dict[str, Any] = {"hook": hook, "message": message}
            if "to" in result:
                entry["to"] = result["to"]
            folded[MESSAGES] = [entry]
        return folded
    return result
