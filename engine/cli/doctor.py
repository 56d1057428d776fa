"""`evolve doctor`: what is wrong with a workspace, without changing it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.changes.gitstore import GitError, GitStore
from engine.hooks.discovery import HookFile, scan_hooks
from engine.hooks.protocols import fired_stages, hcp_input
from engine.hooks.registry import discover_hook
from engine.hooks.runner import execute
from engine.hooks.testpath import TestCommand, TestRefused, test_command
from engine.protocol.records import HookRun, new_id
from engine.workspace.config import load_config
from engine.workspace.layout import PROMPT_CONTRACT, Workspace

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass
class Finding:
    level: str
    where: str
    message: str


@dataclass
class Report:
    workspace: str
    findings: list[Finding] = field(default_factory=list)
    hooks: list[dict[str, Any]] = field(default_factory=list)

    def add(self, level: str, where: str, message: str) -> None:
        self.findings.append(Finding(level, where, message))

    @property
    def healthy(self) -> bool:
        return not any(f.level in (ERROR, WARNING) for f in self.findings)

    def summary(self) -> str:
        counts = {lvl: sum(1 for f in self.findings if f.level == lvl) for lvl in (ERROR, WARNING)}
        if self.healthy:
            return f"ok: {self.workspace} ({len(self.hooks)} hooks)"
        return f"{counts[ERROR]} errors, {counts[WARNING]} warnings in {self.workspace}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "workspace": self.workspace,
            "healthy": self.healthy,
            "findings": [asdict(f) for f in self.findings],
            "hooks": self.hooks,
        }


def check_project(report: Report, project: Path, heartbeat_agent: str) -> None:
    """The opencode project's side: the plugin entry and the heartbeat agent (opencode refuses
    prompts for an agent it does not know)."""
    from engine.opencode.shim_install import InstallError, config_path, defined_agents, installed, read_config

    path = config_path(project)
    try:
        data = read_config(path)
    except InstallError as exc:
        report.add(ERROR, str(path), str(exc))
        return
    if not installed(project):
        report.add(
            WARNING,
            str(path),
            f"the evolve plugin is not installed; run: evolve shim install --project {project}",
        )
    if heartbeat_agent not in defined_agents(project, data):
        report.add(
            ERROR,
            str(path),
            f"heartbeat_agent {heartbeat_agent!r} is not an opencode agent here, so heartbeats and notifications "
            f"would be refused; run `evolve shim install --project {project}` (it defines it) or set heartbeat_agent",
        )


async def diagnose(root: Path, env: dict[str, str] | None = None, project: Path | None = None) -> Report:
    env = dict(os.environ if env is None else env)
    ws = Workspace(root)
    report = Report(str(root))
    if not root.is_dir():
        report.add(ERROR, str(root), f"the workspace does not exist; create it with: evolve init {root}")
        return report

    loaded = load_config(ws.config_file, env)
    for issue in loaded.errors:
        report.add(ERROR, "config", str(issue))
    for issue in loaded.warnings:
        report.add(WARNING, "config", str(issue))

    from engine.evals.scenarios import load_scenarios

    for issue in load_scenarios(root).errors:  # a wrong scenario file is left out of every check
        report.add(ERROR, "evals", str(issue))

    hooks, skipped = scan_hooks(ws.hooks_dir)
    if not ws.hooks_dir.is_dir():
        report.add(WARNING, "hooks/", "no hooks/ directory: every stage returns {} (only builtin tools)")
    for s in skipped:
        report.add(ERROR, f"hooks/{s.name}", f"skipped: {s.reason}")
    names: dict[str, str] = {}
    configured = loaded.config.hook_protocols
    hcp_payload = hcp_input(
        "discover",
        ws.read_prompts(),
        {},
        None,
        session=None,
        host_stages=fired_stages(heartbeat=loaded.config.heartbeat_ms >= 0),
        cwd=str(root),
    )

    for hook in hooks:

        async def run(payload: dict[str, Any], hook: HookFile = hook) -> HookRun:
            done = HookRun(id=new_id("run"), stage="discover", hook=hook.name, started_at=0.0, input=payload)
            await execute(
                done,
                hook.path,
                cwd=root,
                timeout_ms=loaded.config.hook_timeout,
                stdout_limit=loaded.config.hook_output_limit,
                env=env,
            )
            return done

        # As the engine discovers it (an hcp hook is asked as one), as if for the first time.
        reg, _run = await discover_hook(hook, configured, None, run, lambda: dict(hcp_payload))
        where = f"hooks/{hook.name}"
        settle = f"; {reg.protocol_settle}" if reg.protocol_settle else ""
        report.add(INFO, where, f"treated as {reg.protocol.value}: {reg.protocol_reason}{settle}")
        for problem in reg.problems:
            report.add(ERROR, where, problem)
        for warning in reg.stage_warnings:
            report.add(WARNING, where, warning)
        if reg.name in names:
            report.add(
                WARNING,
                where,
                f"registers the name {reg.name!r} already used by hooks/{names[reg.name]}; "
                "its tools replace that hook's tools of the same name",
            )
        names[reg.name] = hook.name
        if reg.test is None:
            report.add(
                WARNING, where, "no test registered: edits by the agent are installed without validation"
            )
        else:
            command: TestCommand | None = None
            try:
                command = test_command(root, reg.test)
            except TestRefused as exc:
                report.add(ERROR, where, f"registers test {reg.test!r}, which cannot run: {exc}")
            if command is not None and not command.script.is_file():
                report.add(ERROR, where, f"registers test {command.shown}, which does not exist")
            elif command is not None and command.runs_script and not os.access(command.script, os.X_OK):
                report.add(
                    INFO,
                    str(command.script.relative_to(root.resolve())),
                    "not executable (validation makes it executable before running)",
                )
        report.hooks.append(
            {
                "file": hook.name,
                "name": reg.name,
                "test": reg.test,
                "tools": [t.name for t in reg.tools],
                "protocol": reg.protocol.value,
                "protocol_reason": reg.protocol_reason,
                "protocol_settle": reg.protocol_settle,
                "stages": sorted(reg.stages) if reg.stages is not None else None,
            }
        )

    for stage, name in PROMPT_CONTRACT.items():
        if not (ws.prompts_dir / name).is_file():
            report.add(INFO, f"prompts/{name}", f"missing: the {stage} prompt is not available to hooks")

    if project is not None:
        check_project(report, project, loaded.config.heartbeat_agent)

    store = GitStore(root)
    if not store.exists():
        report.add(
            WARNING,
            "git",
            "not a git repository yet: the engine creates one (with an 'initial' commit) at start",
        )
    else:
        try:
            dirty = store.dirty_files()
            if dirty:
                report.add(
                    WARNING,
                    "git",
                    f"{len(dirty)} uncommitted changes ({', '.join(dirty[:5])}): "
                    "the engine commits them as an external change at start",
                )
            if store.head() is None:
                report.add(WARNING, "git", "the repository has no commits yet")
        except GitError as exc:
            report.add(ERROR, "git", str(exc))
    return report
