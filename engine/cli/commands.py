"""The commands that work on a workspace: init, stage, tools, call, serve, stop, shim, heartbeat,
doctor. A command whose work the running engine does (stage, call, heartbeat) sends the contract's
typed call to it; otherwise it runs an engine in this process for the command."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import sys
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.cli.client import EngineClient, EngineUnavailable
from engine.cli.common import (
    UsageError,
    directory,
    json_arg,
    print_json,
    project_directory,
    running_client,
    say,
    with_engine,
    workspace,
)
from engine.protocol import calls
from engine.protocol.calls import Call
from engine.protocol.records import ToolCallRequest
from engine.protocol.stages import STAGES

if TYPE_CHECKING:
    from engine.runtime import Engine

HEARTBEAT: dict[str, Callable[[], Call[Any]]] = {
    "status": calls.heartbeat,
    "fire": calls.heartbeat_fire,
    "pause": calls.heartbeat_pause,
    "resume": calls.heartbeat_resume,
}
"""`evolve heartbeat ACTION`: the call each action sends."""


def example_files() -> Any:
    return resources.files("engine") / "example"


def cmd_init(args: argparse.Namespace) -> int:
    from engine.changes.gitstore import GitError, GitStore

    root = workspace(args, must_exist=False)
    root.mkdir(parents=True, exist_ok=True)
    created: list[str] = []
    kept: list[str] = []

    def copy_tree(src: Any, rel: str) -> None:
        for entry in sorted(src.iterdir(), key=lambda e: e.name):
            if entry.name == "__pycache__":
                continue
            target_rel = f"{rel}{entry.name}"
            target = root / target_rel
            if entry.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                copy_tree(entry, target_rel + "/")
            elif target.exists() or target.is_symlink():
                kept.append(target_rel)
            else:
                with resources.as_file(entry) as path:
                    shutil.copy2(path, target)
                created.append(target_rel)

    copy_tree(example_files(), "")
    for rel in created:  # hooks and tests run as programs, even where package data lost its mode bits
        folder, _, name = rel.partition("/")
        if folder in ("hooks", "tests") and "/" not in name and not name.startswith("."):
            (root / rel).chmod((root / rel).stat().st_mode | 0o111)
    store = GitStore(root)
    try:
        commit = store.ensure()
        if commit is None and created:
            commit = store.commit(
                "evolve init: example files", {"Origin": "operator", "Tool": "evolve init"}, created
            )
    except GitError as exc:
        print(f"evolve init: {exc}", file=sys.stderr)
        return 1
    print_json(
        {"workspace": str(root), "created": created, "kept": kept, "commit": commit.sha if commit else None}
    )
    for rel in kept:
        print(f"kept existing {rel}", file=sys.stderr)
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    root = workspace(args)
    context = json_arg(args.input, args.input_file, "--input")
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise UsageError("--input must be a JSON object (the stage context)")
    if args.stage not in STAGES:
        raise UsageError(f"unknown stage {args.stage!r}; the stages are: {', '.join(STAGES)}")

    def show(result: dict[str, Any], runs: list[dict[str, Any]] | None) -> int:
        if args.verbose:
            print_json({**result, "runs": runs or []})
        else:
            print_json(result["merged"])
        for hook in result["failed"]:
            print(
                f"hooks/{hook} failed during {args.stage}"
                + (" (recover ran)" if result["recovered"] else ""),
                file=sys.stderr,
            )
        return 0

    client = running_client(args, timeout=3600.0) if args.stage not in ("discover",) else None
    if client is not None:  # the engine runs: dispatch there, so the console sees it live
        with contextlib.closing(client):
            answered = client.send(calls.stage(args.stage, context, args.session, with_runs=args.verbose))
            result = answered.to_dict()
            return show(result, result.pop("run_records", None))

    async def work(engine: Engine) -> int:
        if args.stage == "discover":
            found = await engine.registry.discover()
            print_json(
                {
                    h.file: {"name": h.name, "test": h.test, "tools": h.tools, "problems": h.problems}
                    for h in found.hooks
                }
            )
            return 0
        result = await engine.stages.dispatch(args.stage, context, session=args.session)
        if args.verbose:
            out = result.to_dict()
            if engine.journal is not None:
                from engine.journal.writer import JournalFailing

                try:
                    engine.journal.flush()
                except JournalFailing as exc:
                    print(
                        f"evolve stage: the journal cannot write ({exc}): its runs are not listed",
                        file=sys.stderr,
                    )
                out["runs"] = [r.to_dict() for r in engine.stages.runs_of(result)]
            print_json(out)
        else:
            print_json(result.merged)
        for hook in result.failed:
            print(
                f"hooks/{hook} failed during {args.stage}" + (" (recover ran)" if result.recovered else ""),
                file=sys.stderr,
            )
        return 0

    return asyncio.run(with_engine(root, work))


def cmd_tools(args: argparse.Namespace) -> int:
    root = workspace(args)

    async def work(engine: Engine) -> int:
        specs = engine.tools.specs()
        if args.json:
            print_json([s.to_dict() for s in specs])
            return 0
        for spec in specs:
            props = spec.schema.get("properties", {})
            required = set(spec.schema.get("required", []))
            params = ", ".join(f"{p}{'' if p in required else '?'}" for p in props)
            perm = f"  [permission: {spec.permission}]" if spec.permission else ""
            print(f"{spec.name}({params})  <{spec.origin}>{perm}\n    {spec.description}")
        return 0

    return asyncio.run(with_engine(root, work))


def cmd_call(args: argparse.Namespace) -> int:
    root = workspace(args)
    tool_args = json_arg(args.args, args.args_file, "--args")
    if tool_args is None:
        tool_args = {}
    if not isinstance(tool_args, dict):
        raise UsageError("--args must be a JSON object")

    def show(call: dict[str, Any]) -> int:
        if args.json:
            print_json(call)
        else:
            print(call.get("output"))
        return 1 if call.get("error") else 0

    client = running_client(args, timeout=3600.0)
    if client is not None:  # the workspace's engine runs: call through it, as the agent would
        with contextlib.closing(client):
            request = ToolCallRequest(tool_args, args.session, args.call_id, origin="operator")
            return show(client.send(calls.tool_call(args.tool, request)).to_dict())

    async def work(engine: Engine) -> int:
        call = await engine.tools.call(
            args.tool, tool_args, session=args.session, call_id=args.call_id, origin="operator"
        )
        return show(call.to_dict())

    return asyncio.run(with_engine(root, work))


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.remote import RefusedListen, check, read_token, tls_context
    from engine.service import AlreadyRunning, serve

    root = workspace(args)
    try:
        token_file, cert, key = (
            Path(p) if p else None for p in (args.token_file, args.tls_cert, args.tls_key)
        )
        listen = check(args.host, args.listen, token_file, cert, key, tunnel=args.behind_tunnel)
        token = read_token(token_file) if token_file is not None else None
        if listen is not None and listen.tls:
            tls_context(listen)  # a certificate that does not load is said before anything starts
        code = asyncio.run(serve(root, args.host, args.port, token=token, listen=listen))
    except (AlreadyRunning, RefusedListen) as exc:
        print(f"evolve serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # before serve() took over the signal: asyncio cancelled it
        code = 130
    if code == 130:
        say(f"evolve serve: interrupted; the engine for {root} stopped")
    return code


def cmd_stop(args: argparse.Namespace) -> int:
    from engine.protocol.announcement import Announcement
    from engine.service import running

    root = workspace(args)
    found = running(root)
    if found is None:
        stale = Announcement.read(root)
        print(
            f"no engine runs for {root}" + (f" (stale announcement of pid {stale.pid})" if stale else ""),
            file=sys.stderr,
        )
        return 1
    with contextlib.closing(EngineClient(found.url, found.token, timeout=5)) as client:
        client.send(calls.shutdown())
    print(f"stopping the engine for {root} (pid {found.pid})", file=sys.stderr)
    return 0


def cmd_shim(args: argparse.Namespace) -> int:
    from engine.opencode.shim_install import InstallError, install, uninstall

    if args.action == "install":
        project = project_directory(args.project, "shim install")
    else:
        project = directory(args.project, "--project") if args.project else Path.cwd()
    try:
        if args.action == "install":
            root = workspace(args, must_exist=False)
            result = install(project, root, args.plugin_command.split() if args.plugin_command else None)
        else:
            result = uninstall(project)
    except InstallError as exc:
        print(f"evolve shim {args.action}: {exc}", file=sys.stderr)
        return 1
    print_json(result)
    if args.action == "install" and not root.is_dir():
        say(
            f"evolve shim install: the workspace {root} does not exist yet; the plugin's engine needs it: "
            f"create it with: evolve init {root}"
        )
    return 0


def cmd_heartbeat(args: argparse.Namespace) -> int:
    client = running_client(args, timeout=3600.0)
    if client is None:
        raise UsageError(
            "no engine runs for this workspace; the heartbeat lives in the engine (start it with `evolve serve`, "
            "or start opencode with the evolve plugin)"
        )
    try:
        print_json(client.send(HEARTBEAT[args.action]()).to_dict())
    except EngineUnavailable as exc:
        print(f"evolve heartbeat {args.action}: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from engine.cli.doctor import diagnose

    root = workspace(args, must_exist=False)
    project = directory(args.project, "--project") if args.project else None
    report = asyncio.run(diagnose(root, project=project))
    if args.json:
        print_json(report.to_dict())
    else:
        for finding in report.findings:
            print(f"{finding.level:7} {finding.where}: {finding.message}")
        print(report.summary())
    return 0 if report.healthy else 1
