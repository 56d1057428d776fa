"""The `evolve` command line. Output that a program reads is JSON; messages for people go to stderr."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata, resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine import __version__
from engine.cli.client import EngineClient, EngineUnavailable
from engine.protocol.stages import STAGES
from engine.protocol.workspace import resolve_workspace

if TYPE_CHECKING:
    from engine.protocol.records import PendingChange
    from engine.runtime import Engine

COMMANDS_GROUP = "evolve.commands"
"""Entry points that add subcommands (the console registers `evolve console` here), so that the
engine's command line offers them without importing their packages."""


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
NEEDS_GIT = frozenset({"init", "stage", "tools", "call", "serve", "doctor", "demo", "console"})
"""The commands that work on a workspace's git repository (GitPython runs the git program)."""


class UsageError(Exception):
    """A mistake in how the command was called: printed without a traceback, exit status 2."""


def git_missing() -> bool:
    """Whether the git program is missing: GitPython cannot even be imported without it."""
    return shutil.which(os.environ.get("GIT_PYTHON_GIT_EXECUTABLE") or "git") is None


def log_level(given: str | None) -> str:
    """The log level from --log-level, else $EVOLVE_LOG_LEVEL, else WARNING; UsageError naming where a
    bad one came from."""
    source, value = (
        ("--log-level", given)
        if given is not None
        else ("EVOLVE_LOG_LEVEL", os.environ.get("EVOLVE_LOG_LEVEL"))
    )
    if not value:
        return "WARNING"
    if value.strip().upper() not in LOG_LEVELS:
        raise UsageError(f"{source} {value!r} is not a log level; use one of {', '.join(LOG_LEVELS)}")
    return value.strip().upper()


def _directory(path: str, option: str) -> Path:
    """`path` as an absolute directory that exists; UsageError otherwise (nothing is created)."""
    found = Path(path).expanduser().absolute()
    if not found.is_dir():
        raise UsageError(f"{option} {found}: no such directory (check the path; nothing was created)")
    return found


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _workspace(args: argparse.Namespace, must_exist: bool = True) -> Path:
    root = resolve_workspace(getattr(args, "workspace", None) or getattr(args, "dir", None))
    if must_exist and not root.is_dir():
        raise UsageError(f"workspace {root} does not exist; create one with: evolve init {root}")
    return root


def _json_arg(text: str | None, file: str | None, what: str) -> Any:
    if text is not None and file is not None:
        raise UsageError(f"give {what} either inline or as a file, not both")
    if file is not None:
        try:
            text = Path(file).read_text(encoding="utf-8") if file != "-" else sys.stdin.read()
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror}") from exc
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc}") from exc


async def _with_engine(root: Path, work: Callable[[Engine], Awaitable[int]]) -> int:
    from engine.runtime import Engine  # only the commands that run hooks need the engine itself

    engine = Engine(root, warm_start=False)  # one command: an interpreter kept ready would go unused
    try:
        await engine.start()
        result: int = await work(engine)
        return result
    finally:
        await engine.close()


# ---- commands ---------------------------------------------------------------------------------


def example_files() -> Any:
    return resources.files("engine") / "example"


def cmd_init(args: argparse.Namespace) -> int:
    from engine.changes.gitstore import GitError, GitStore

    root = _workspace(args, must_exist=False)
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
    _print_json(
        {"workspace": str(root), "created": created, "kept": kept, "commit": commit.sha if commit else None}
    )
    for rel in kept:
        print(f"kept existing {rel}", file=sys.stderr)
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    root = _workspace(args)
    context = _json_arg(args.input, args.input_file, "--input")
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise UsageError("--input must be a JSON object (the stage context)")
    if args.stage not in STAGES:
        raise UsageError(f"unknown stage {args.stage!r}; the stages are: {', '.join(STAGES)}")

    def show(result: dict[str, Any], runs: list[dict[str, Any]] | None) -> int:
        if args.verbose:
            _print_json({**result, "runs": runs or []})
        else:
            _print_json(result["merged"])
        for hook in result["failed"]:
            print(
                f"hooks/{hook} failed during {args.stage}"
                + (" (recover ran)" if result["recovered"] else ""),
                file=sys.stderr,
            )
        return 0

    client = _running_client(args, timeout=3600.0) if args.stage not in ("discover",) else None
    if client is not None:  # the engine runs: dispatch there, so the console sees it live
        with contextlib.closing(client):
            body = {"context": context, "session": args.session, "with_runs": args.verbose}
            result = client.post(f"/v1/stages/{args.stage}", body)
            return show(result, result.pop("run_records", None))

    async def work(engine: Engine) -> int:
        if args.stage == "discover":
            found = await engine.registry.discover()
            _print_json(
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
                engine.journal.flush()
                by_id = {r.id: r for r in engine.journal.runs(dispatch_id=result.id, limit=10_000)}
                out["runs"] = [by_id[i].to_dict() for i in result.runs if i in by_id]
            _print_json(out)
        else:
            _print_json(result.merged)
        for hook in result.failed:
            print(
                f"hooks/{hook} failed during {args.stage}" + (" (recover ran)" if result.recovered else ""),
                file=sys.stderr,
            )
        return 0

    return asyncio.run(_with_engine(root, work))


def cmd_tools(args: argparse.Namespace) -> int:
    root = _workspace(args)

    async def work(engine: Engine) -> int:
        specs = engine.tools.specs()
        if args.json:
            _print_json([s.to_dict() for s in specs])
            return 0
        for spec in specs:
            props = spec.schema.get("properties", {})
            required = set(spec.schema.get("required", []))
            params = ", ".join(f"{p}{'' if p in required else '?'}" for p in props)
            perm = f"  [permission: {spec.permission}]" if spec.permission else ""
            print(f"{spec.name}({params})  <{spec.origin}>{perm}\n    {spec.description}")
        return 0

    return asyncio.run(_with_engine(root, work))


def cmd_call(args: argparse.Namespace) -> int:
    root = _workspace(args)
    tool_args = _json_arg(args.args, args.args_file, "--args")
    if tool_args is None:
        tool_args = {}
    if not isinstance(tool_args, dict):
        raise UsageError("--args must be a JSON object")

    def show(call: dict[str, Any]) -> int:
        if args.json:
            _print_json(call)
        else:
            print(call.get("output"))
        return 1 if call.get("error") else 0

    client = _running_client(args, timeout=3600.0)
    if client is not None:  # the workspace's engine runs: call through it, as the agent would
        with contextlib.closing(client):
            body = {"args": tool_args, "session": args.session, "call_id": args.call_id, "origin": "operator"}
            return show(client.post(f"/v1/tools/{args.tool}/call", body))

    async def work(engine: Engine) -> int:
        call = await engine.tools.call(
            args.tool, tool_args, session=args.session, call_id=args.call_id, origin="operator"
        )
        return show(call.to_dict())

    return asyncio.run(_with_engine(root, work))


def cmd_serve(args: argparse.Namespace) -> int:
    from engine.service import AlreadyRunning, serve

    root = _workspace(args)
    try:
        return asyncio.run(serve(root, args.host, args.port))
    except AlreadyRunning as exc:
        print(f"evolve serve: {exc}", file=sys.stderr)
        return 1


def cmd_stop(args: argparse.Namespace) -> int:
    from engine.protocol.announcement import Announcement
    from engine.service import running

    root = _workspace(args)
    found = running(root)
    if found is None:
        stale = Announcement.read(root)
        print(
            f"no engine runs for {root}" + (f" (stale announcement of pid {stale.pid})" if stale else ""),
            file=sys.stderr,
        )
        return 1
    with contextlib.closing(EngineClient(found.url, found.token, timeout=5)) as client:
        client.post("/v1/shutdown")
    print(f"stopping the engine for {root} (pid {found.pid})", file=sys.stderr)
    return 0


def cmd_shim(args: argparse.Namespace) -> int:
    from engine.opencode.shim_install import InstallError, install, uninstall

    project = _directory(args.project, "--project") if args.project else Path.cwd()
    try:
        if args.action == "install":
            root = _workspace(args, must_exist=False)
            result = install(project, root, args.plugin_command.split() if args.plugin_command else None)
        else:
            result = uninstall(project)
    except InstallError as exc:
        print(f"evolve shim {args.action}: {exc}", file=sys.stderr)
        return 1
    _print_json(result)
    return 0


def _running_client(args: argparse.Namespace, timeout: float = 30.0) -> EngineClient | None:
    if getattr(args, "attach", None):
        if not args.token:
            raise UsageError("--attach needs --token")
        return EngineClient(args.attach, args.token, timeout)
    return EngineClient.for_workspace(_workspace(args), timeout)


def cmd_heartbeat(args: argparse.Namespace) -> int:
    client = _running_client(args, timeout=3600.0)
    if client is None:
        raise UsageError(
            "no engine runs for this workspace; the heartbeat lives in the engine (start it with `evolve serve`, "
            "or start opencode with the evolve plugin)"
        )
    try:
        if args.action == "status":
            _print_json(client.get("/v1/heartbeat"))
        else:
            _print_json(client.post(f"/v1/heartbeat/{args.action}"))
    except EngineUnavailable as exc:
        print(f"evolve heartbeat {args.action}: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from engine.protocol.records import ReplayResult
    from engine.replay.inputs import UnknownStage, check_stages
    from engine.replay.text import render

    root = _workspace(args)
    try:
        stages = check_stages(args.stage or [])
    except UnknownStage as exc:
        raise UsageError(str(exc)) from exc
    if args.limit < 1:
        raise UsageError("--limit must be at least 1 (recorded inputs per stage)")
    pending = args.change.startswith("chg_")
    client = _running_client(args, timeout=3600.0)
    if client is not None:  # the engine runs: replay there, so the console sees it
        with contextlib.closing(client):
            _check_change(root, args.change, pending)  # a mistake is a usage error here as well
            data = _replay_remotely(client, args.change, pending, stages, args.limit)
    else:
        data = asyncio.run(_replay_here(root, args.change, pending, stages, args.limit))
    result = ReplayResult.from_dict(data)
    if args.json:
        _print_json(data)
    else:
        sys.stdout.write(render(result, color=sys.stdout.isatty()))
    if result.state == "cancelled":
        return 130
    return 0 if result.state == "done" else 1


def _read_pending(root: Path, pending_id: str) -> PendingChange:
    from engine.protocol.records import PendingChange

    path = root / "state" / "pending" / f"{os.path.basename(pending_id)}.json"
    try:
        return PendingChange.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        raise UsageError(f"no pending change {pending_id!r} in {root}") from None


def _check_change(root: Path, ref: str, pending: bool) -> None:
    """The commit or the pending change exists (and is still pending)."""
    from engine.changes.gitstore import GitError, GitStore

    if pending:
        item = _read_pending(root, ref)
        if item.status != "pending":
            raise UsageError(f"change {ref} was already {item.status}")
        return
    try:
        sha = GitStore(root).resolve(ref)
    except GitError:
        sha = ""
    if not sha:
        raise UsageError(f"no commit {ref!r} in {root}")


def _progress(done: int, total: int, message: str) -> None:
    if sys.stderr.isatty():
        figures = f" {done}/{total}" if total else ""
        sys.stderr.write(f"\r\x1b[Kreplay: {message}{figures}")
        sys.stderr.flush()


def _replay_remotely(
    client: EngineClient, ref: str, pending: bool, stages: list[str], limit: int
) -> dict[str, Any]:
    import time

    route = f"/v1/pending/{ref}/replay" if pending else f"/v1/changes/{ref}/replay"
    started = client.post(route, {"stages": stages or None, "limit": limit})
    replay_id = started["id"]
    try:
        while True:
            found: dict[str, Any] = client.get(f"/v1/replays/{replay_id}")
            if found.get("state") != "running":
                return found
            _progress(found.get("done", 0), found.get("total", 0), "replaying")
            time.sleep(0.2)
    except KeyboardInterrupt:
        with contextlib.suppress(EngineUnavailable):
            client.post(f"/v1/replays/{replay_id}/cancel")
        raise
    finally:
        _progress_done()


def _progress_done() -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r\x1b[K")
        sys.stderr.flush()


async def _replay_here(root: Path, ref: str, pending: bool, stages: list[str], limit: int) -> dict[str, Any]:
    """No engine runs: replay in this process, from the workspace's journal (read only)."""
    from engine.changes.gitstore import GitStore
    from engine.changes.history import ChangeError
    from engine.journal.store import Journal
    from engine.protocol.records import Record, ReplayProgress
    from engine.replay.replayer import Replayer, ReplayError
    from engine.workspace.layout import Workspace

    ws = Workspace(root)
    journal = Journal(ws.journal_file) if ws.journal_file.exists() else None

    def read_pending(pending_id: str) -> PendingChange:
        try:
            return _read_pending(root, pending_id)
        except UsageError as exc:
            raise ChangeError(str(exc)) from None

    def publish(record: Record) -> None:
        if isinstance(record, ReplayProgress):
            _progress(record.done, record.total, record.message)

    replayer = Replayer(
        root, GitStore(root), journal, os.environ, publish, read_pending, ws.state_dir / "replays"
    )
    try:
        change = await (replayer.pending_change(ref) if pending else replayer.commit(ref))
        return (await replayer.replay(change, stages or None, limit)).to_dict()
    except ReplayError as exc:
        raise UsageError(str(exc)) from exc
    finally:
        _progress_done()
        await replayer.close()
        if journal is not None:
            journal.close()


def cmd_doctor(args: argparse.Namespace) -> int:
    from engine.cli.doctor import diagnose

    root = _workspace(args, must_exist=False)
    project = _directory(args.project, "--project") if args.project else None
    report = asyncio.run(diagnose(root, project=project))
    if args.json:
        _print_json(report.to_dict())
    else:
        for finding in report.findings:
            print(f"{finding.level:7} {finding.where}: {finding.message}")
        print(report.summary())
    return 0 if report.healthy else 1


# ---- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        metavar="DIR",
        default=argparse.SUPPRESS,  # so that a subcommand does not reset a value given before it
        help="the workspace (default: $OPENCODE_EVOLVE_WORKSPACE, else ~/workspace)",
    )
    parser = argparse.ArgumentParser(
        prog="evolve", description="Runtime and tools for self-modifying opencode agents.", parents=[common]
    )
    parser.add_argument("--version", action="version", version=f"evolve {__version__}")
    parser.add_argument(
        "--log-level",
        metavar="LEVEL",
        help=f"log level on stderr: one of {', '.join(LOG_LEVELS)} (default: $EVOLVE_LOG_LEVEL, else WARNING)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("init", parents=[common], help="create an example workspace (never overwrites a file)")
    p.add_argument("dir", nargs="?", metavar="DIR", help="where (default: the workspace)")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser(
        "stage", parents=[common], help="dispatch one stage to every hook, print the merged result"
    )
    p.add_argument("stage", metavar="STAGE", help=f"one of {', '.join(STAGES)}")
    p.add_argument("--input", metavar="JSON", help="the stage context as a JSON object")
    p.add_argument("--input-file", metavar="FILE", help="read the context from FILE (- for stdin)")
    p.add_argument("--session", metavar="ID", help="bind the call to a session (adds its history)")
    p.add_argument(
        "--verbose", "-v", action="store_true", help="print the whole dispatch with every hook run"
    )
    p.set_defaults(func=cmd_stage)

    p = sub.add_parser("tools", parents=[common], help="list every tool with its JSON Schema and permission")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_tools)

    p = sub.add_parser("call", parents=[common], help="call a tool exactly as the agent would")
    p.add_argument("tool", metavar="TOOL", help="the full tool name, e.g. notes_add (see: evolve tools)")
    p.add_argument("--args", metavar="JSON", help="the arguments as a JSON object")
    p.add_argument("--args-file", metavar="FILE", help="read the arguments from FILE (- for stdin)")
    p.add_argument(
        "--session",
        metavar="ID",
        help="the session the call belongs to (passed to the hook, recorded in git)",
    )
    p.add_argument("--call-id", metavar="ID", help="recorded in the commit trailers")
    p.add_argument("--json", action="store_true", help="print the whole call record")
    p.set_defaults(func=cmd_call)

    p = sub.add_parser("serve", parents=[common], help="run the engine and its HTTP API for the workspace")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: any free port)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("stop", parents=[common], help="stop the workspace's running engine")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser(
        "shim", parents=[common], help="add the evolve plugin to (or remove it from) an opencode project"
    )
    p.add_argument(
        "action",
        choices=["install", "uninstall"],
        help="install: add the plugin entry (and its agent); uninstall: remove them",
    )
    p.add_argument(
        "--project", metavar="DIR", help="the opencode project directory (default: the current one)"
    )
    p.add_argument(
        "--command",
        dest="plugin_command",  # not `command`: that is the subcommand's name
        metavar="CMD",
        help="how the plugin starts evolve (default: this Python, -m engine)",
    )
    p.set_defaults(func=cmd_shim)

    p = sub.add_parser(
        "heartbeat", parents=[common], help="the running engine's heartbeat: status, fire, pause, resume"
    )
    p.add_argument(
        "action",
        choices=["status", "fire", "pause", "resume"],
        help="status: show it; fire: run one tick now; pause, resume: the timer",
    )
    p.add_argument(
        "--attach", metavar="URL", help="an engine elsewhere (default: the workspace's running engine)"
    )
    p.add_argument("--token", metavar="TOKEN", help="that engine's token")
    p.set_defaults(func=cmd_heartbeat)

    p = sub.add_parser(
        "replay",
        parents=[common],
        help="what a change (commit or pending change) does to the agent's recorded traffic",
    )
    p.add_argument(
        "change", metavar="REV|PENDING_ID", help="a commit (sha, HEAD, ...) or a pending change's id"
    )
    p.add_argument(
        "--stage",
        action="append",
        metavar="STAGE",
        help="replay this stage (repeatable); default: the stages the change can affect",
    )
    p.add_argument(
        "--limit", type=int, default=20, metavar="N", help="recorded inputs per stage (default 20)"
    )
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("doctor", parents=[common], help="check the workspace; exit 1 when something is wrong")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument(
        "--project", metavar="DIR", help="also check this opencode project's plugin entry and agents"
    )
    p.set_defaults(func=cmd_doctor)
    for entry in metadata.entry_points(group=COMMANDS_GROUP):
        entry.load()(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        level = log_level(args.log_level)
    except UsageError as exc:
        print(f"evolve: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, format="evolve: %(levelname)s %(name)s: %(message)s")
    if args.command in NEEDS_GIT and not getattr(args, "attach", None) and git_missing():
        print(
            f"evolve {args.command}: git is not installed (or not on PATH); install it "
            "(Debian/Ubuntu: apt-get install git) and run again",
            file=sys.stderr,
        )
        return 1
    try:
        code: int = args.func(args)
        return code
    except UsageError as exc:
        print(f"evolve {args.command}: {exc}", file=sys.stderr)
        return 2
    except EngineUnavailable as exc:
        print(f"evolve {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `evolve tools | head`
        sys.stderr.close()
        return 0
