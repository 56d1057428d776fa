"""`evolve demo`: real opencode with the evolve plugin, a real engine and the example workspace in a
throwaway directory, with the scripted model (`story.Story`) in place of an LLM, driven by a chat that
types by itself. Nothing leaves the machine: the model server, opencode and the engine listen on
127.0.0.1 only.

Layout of the directory (removed when the demo stops, unless the user chose it with `--dir`):

    home/        opencode's HOME, XDG directories and TMPDIR (its plugin dependencies from the seed)
    workspace/   the evolve workspace (`evolve init`, then the demo's settings), a git repository
    project/     the opencode project: opencode.json names the scripted model and loads the plugin
    opencode.log, engine.log
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx

from engine.cli.client import EngineClient, EngineUnavailable
from engine.protocol import calls
from engine.protocol.announcement import Announcement
from engine.protocol.tlsverify import verify_for

from . import opencode_setup
from .scripted_model import MockLLM
from .signals import DemoSignals, Stopped
from .story import BAD_RULE, OPENING, Story

MODEL_PROVIDER = "scripted"
MODEL_ID = "demo"
MODEL_NAME = "Scripted demo model (not an LLM)"
CHAT_TITLE = "chat with your note-keeper (scripted)"
SETTINGS = ("EVOLVE_", "OPENCODE_")
DEMO_CONFIG = """\
// The demo's settings: a heartbeat every {seconds:g} s; after {count} heartbeats the next one starts a
// new heartbeat session. The model is the scripted one the demo serves on 127.0.0.1.
{{
  "heartbeat_ms": {heartbeat_ms},
  "heartbeat_cleanup": "new",
  "heartbeat_cleanup_count": {count},
  "heartbeat_skip_active": false,
  "model": "{provider}/{model}",
}}
"""

Say = Callable[[str, str, str | None], None]
"""How the demo tells the person something: (message, severity: information, warning, or fixed: the
warning before was acted on, and goes; the commit it is about, which a key of the console then
selects)."""


class DemoError(RuntimeError):
    """The demo could not start; the message says what failed and where its logs are."""


@dataclass
class DemoOptions:
    directory: Path | None = None
    """Where to build the demo (kept afterwards); None: a new temporary directory, removed at the end."""
    heartbeat_ms: int = 8000
    cleanup_count: int = 2
    pause_s: float = 4.0
    """Seconds between the end of one chat turn and the next user message, once the opening scenes
    are played (they follow each other faster, so that all of it shows within a minute)."""
    opening_pause_s: float = 1.5


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def without_settings(env: dict[str, str]) -> dict[str, str]:
    """The user's own EVOLVE_* and OPENCODE_* settings would point the demo at their workspace. Where
    evolve caches opencode is kept: the engine's behaviour checks start opencode from there too."""
    kept = (opencode_setup.CACHE_VARIABLE,)
    return {k: v for k, v in env.items() if k in kept or not k.startswith(SETTINGS)}


class Demo:
    def __init__(
        self,
        options: DemoOptions,
        progress: Callable[[str], None],
        spawning: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
    ) -> None:
        self.options = options
        self.progress = progress
        # Around starting a process: a signal that would stop the demo waits until the process is
        # held (evolve_demo/signals.py), so that the stop can end it.
        self.spawning = spawning
        self.keep = options.directory is not None
        self.base = (options.directory or Path(tempfile.mkdtemp(prefix="evolve-demo-"))).absolute()
        self.home = self.base / "home"
        self.workspace = self.base / "workspace"
        self.project = self.base / "project"
        self.say: Say = lambda text, severity, change: None
        self.story = Story(on_bad_edit=self._bad_edit_made, on_keep_edit=self._keep_edit_made)
        self.model: MockLLM | None = None
        self.engine: subprocess.Popen[bytes] | None = None
        self.opencode: subprocess.Popen[bytes] | None = None
        self.opencode_url = ""
        self.stopping = threading.Event()
        self.driver: threading.Thread | None = None
        self.driver_error: str | None = None
        self.seeded = False

    # ---- start ----------------------------------------------------------------------------------------

    def start(self) -> Announcement:
        """Everything up to a connected opencode; the engine's announcement (for the console)."""
        if self.keep and self.base.exists() and any(self.base.iterdir()):
            raise DemoError(f"{self.base} is not empty; give --dir a new or empty directory")
        self.base.mkdir(parents=True, exist_ok=True)
        binary = opencode_setup.install(progress=self.progress)
        self._prepare_home()
        self._make_workspace()
        self.model = MockLLM(self.story.respond, model=MODEL_ID, title=CHAT_TITLE)
        self._make_project(self.model.url)
        found = self._start_engine()
        self._start_opencode(binary)
        return found

    def _prepare_home(self) -> None:
        if not opencode_setup.plugin_deps_ready(opencode_setup.seed_dir()):
            with contextlib.suppress(opencode_setup.SetupError):
                opencode_setup.prepare_seed(progress=self.progress, quiet=True)
        self.seeded = opencode_setup.make_home(self.home)
        if not self.seeded:
            self.progress(
                "opencode installs its plugin dependencies on this first start (from the npm registry; "
                "5-15 s, kept for the next time)"
            )

    def _make_workspace(self) -> None:
        from engine.changes.gitstore import GitStore

        self._run([sys.executable, "-m", "engine", "init", str(self.workspace)], "evolve init")
        config = self.workspace / "config" / "evolve.jsonc"
        config.write_text(
            DEMO_CONFIG.format(
                seconds=self.options.heartbeat_ms / 1000,
                heartbeat_ms=self.options.heartbeat_ms,
                count=self.options.cleanup_count,
                provider=MODEL_PROVIDER,
                model=MODEL_ID,
            )
        )
        GitStore(self.workspace).commit(
            "demo: a heartbeat every few seconds, the scripted model",
            {"Origin": "operator", "Tool": "evolve demo"},
            ["config/evolve.jsonc"],
        )

    def _make_project(self, model_url: str) -> None:
        from engine.opencode.shim_install import install

        self.project.mkdir(parents=True)
        self._run(["git", "init", "-q", str(self.project)], "git init")
        config = opencode_setup.provider_config(
            model_url, provider=MODEL_PROVIDER, name=MODEL_NAME, model=MODEL_ID, api_key="none"
        )
        (self.project / "opencode.json").write_text(json.dumps(config, indent=2) + "\n")
        install(self.project, self.workspace)

    def _run(self, argv: list[str], what: str) -> None:
        with self.spawning():  # made whole (an `evolve init` cut short would write on as it is removed)
            proc = subprocess.run(
                argv, capture_output=True, text=True, timeout=120, env=without_settings(dict(os.environ))
            )
        if proc.returncode != 0:
            raise DemoError(f"{what} failed (exit {proc.returncode}): {proc.stderr.strip()}")

    def _start_engine(self) -> Announcement:
        log = open(self.base / "engine.log", "ab")  # noqa: SIM115 - handed to the child
        with self.spawning():
            self.engine = subprocess.Popen(
                [sys.executable, "-m", "engine", "serve", "--workspace", str(self.workspace)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.workspace,
                env=without_settings(dict(os.environ)),
                start_new_session=True,  # a Ctrl-C in the terminal reaches the demo, which stops it
            )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.engine.poll() is not None:
                raise DemoError(f"the engine exited {self.engine.returncode}; see {self.base / 'engine.log'}")
            found = Announcement.read(self.workspace)
            if found is not None and found.pid == self.engine.pid and found.alive():
                return found
            time.sleep(0.1)
        raise DemoError(f"the engine did not start within 60 s; see {self.base / 'engine.log'}")

    def _start_opencode(self, binary: Path) -> None:
        port = free_port()
        self.opencode_url = f"http://127.0.0.1:{port}"
        env = opencode_setup.opencode_env(without_settings(dict(os.environ)), self.home, self.project)
        log = open(self.base / "opencode.log", "ab")  # noqa: SIM115 - handed to the child
        with self.spawning():
            self.opencode = subprocess.Popen(
                [str(binary), "serve", "--port", str(port), "--hostname", "127.0.0.1"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.project,
                env=env,
                start_new_session=True,
            )
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.opencode.poll() is not None:
                raise DemoError(
                    f"opencode exited {self.opencode.returncode}; see {self.base / 'opencode.log'}"
                )
            with contextlib.suppress(httpx.HTTPError, ValueError):
                health = httpx.get(
                    f"{self.opencode_url}/global/health", timeout=2, verify=verify_for(self.opencode_url)
                )
                if health.json().get("healthy") is True:
                    return
            time.sleep(0.2)
        raise DemoError(f"opencode did not answer within 60 s; see {self.base / 'opencode.log'}")

    # ---- the chat that types by itself ----------------------------------------------------------------

    def start_chat(self, say: Say) -> None:
        self.say = say
        self.driver = threading.Thread(target=self._chat, name="evolve-demo-chat", daemon=True)
        self.driver.start()

    def _engine_sees_opencode(self) -> bool:
        found = Announcement.read(self.workspace)
        if found is None:
            return False
        with (
            contextlib.suppress(EngineUnavailable),
            contextlib.closing(EngineClient(found.url, found.token, 5)) as c,
        ):
            return bool(c.send(calls.status()).opencode)
        return False

    def _chat(self) -> None:
        try:
            with httpx.Client(
                base_url=self.opencode_url,
                headers={"x-opencode-directory": str(self.project)},
                timeout=httpx.Timeout(300, connect=5),
                verify=verify_for(self.opencode_url),
            ) as http:
                http.get("/session").raise_for_status()  # opencode loads its plugins on the first request
                deadline = time.monotonic() + 180
                while not self._engine_sees_opencode():
                    if self.stopping.wait(0.2):
                        return
                    if time.monotonic() > deadline:
                        raise DemoError("opencode's evolve plugin did not reach the engine within 180 s")
                if not self.seeded:
                    opencode_setup.keep_seed(self.home)
                session = http.post("/session", json={"title": CHAT_TITLE}).json()["id"]
                for turn, text in enumerate(self.story.user_turns()):
                    if self.stopping.is_set():
                        return
                    http.post(f"/session/{session}/message", json={"parts": [{"type": "text", "text": text}]})
                    opening = turn < len(OPENING)
                    if self.stopping.wait(self.options.opening_pause_s if opening else self.options.pause_s):
                        return
        except Exception as exc:  # shown in the console and printed at the end; the demo keeps its UI
            if not self.stopping.is_set():
                self.driver_error = f"{type(exc).__name__}: {exc}"
                self.say(f"the demo's chat stopped: {self.driver_error}; see {self.base}", "error", None)

    def _last_change_to(self, path: str) -> str | None:
        """The newest commit of the workspace that changed `path` (what a notice names)."""
        proc = subprocess.run(
            ["git", "-C", str(self.workspace), "log", "-1", "--format=%H", "--", path],
            capture_output=True,
            text=True,
            timeout=30,
            env=without_settings(dict(os.environ)),
        )
        return proc.stdout.strip() or None

    def _keep_edit_made(self) -> None:
        self.say(
            "The agent just added a rule to its chat prompt: never delete a note. To see what the "
            'agent now does, select it (j) and check its behaviour (b): "forget a note" passes '
            "before it and fails after; r reverts it.",
            "information",
            self._last_change_to("prompts/chat.md"),
        )

    def _bad_edit_made(self) -> None:
        self.say(
            "The agent's heartbeat just edited hooks/notes.py: it passed its test, but it makes every "
            "heartbeat forget unpinned notes. Find it in 5 Self-modifications (j) and revert it (r).",
            "warning",
            self._last_change_to("hooks/notes.py"),
        )
        threading.Thread(target=self._watch_for_the_fix, name="evolve-demo-fix", daemon=True).start()

    def _watch_for_the_fix(self) -> None:
        """Once the bad rule is gone from the hook (the operator reverted the edit), say so, so that
        the warning does not stay on screen as if nothing had been done."""
        hook = self.workspace / "hooks" / "notes.py"
        while not self.stopping.wait(1.0):
            with contextlib.suppress(OSError):
                if BAD_RULE not in hook.read_text(encoding="utf-8"):
                    self.say(
                        "Done: hooks/notes.py no longer tells the heartbeat to forget notes. The sessions "
                        "you refreshed compose their prompt anew; the agent was told of the revert.",
                        "fixed",
                        None,
                    )
                    return

    # ---- stop -----------------------------------------------------------------------------------------

    def stop(self) -> str:
        """Stop everything the demo started; remove its directory unless it was given. What it did."""
        self.stopping.set()
        _terminate(self.opencode)
        self._stop_engine()
        if self.model is not None:
            self.model.close()
        if self.driver is not None:
            self.driver.join(10)
        if self.keep:
            return f"stopped opencode, the engine and the scripted model; kept {self.base}"
        shutil.rmtree(self.base, ignore_errors=True)
        return "stopped opencode, the engine and the scripted model, and removed the demo's directory"

    def _stop_engine(self) -> None:
        found = Announcement.read(self.workspace)
        if found is not None:
            with (
                contextlib.suppress(EngineUnavailable),
                contextlib.closing(EngineClient(found.url, found.token, 5)) as c,
            ):
                c.send(calls.shutdown())
        _terminate(self.engine, grace=15)
        # The plugin restarts an engine that died while opencode ran: that one is the demo's too.
        if found is not None and (self.engine is None or found.pid != self.engine.pid):
            _kill_pid(found.pid, grace=10)


def _terminate(proc: subprocess.Popen[bytes] | None, grace: float = 10) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _kill_pid(pid: int, grace: float) -> None:
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def say_line(text: str) -> None:
    """A line on stderr; none when the terminal is gone (closed while the demo stops)."""
    with contextlib.suppress(OSError):
        print(f"evolve demo: {text}", file=sys.stderr, flush=True)


def run(options: DemoOptions) -> int:
    """`evolve demo`: start, open the console on the demo's engine, stop everything when it closes.
    Whatever ends it (`q`, a failed start, a signal at any moment: evolve_demo/signals.py), the stop
    runs to its end; the exit status is 0 after `q`, 1 after a failed start, 128 + the signal's number
    after a signal."""
    from evolve_console.alerts import Alert, Severity
    from evolve_console.app import EvolveConsole
    from evolve_console.client import Target
    from evolve_console.command import run_in_terminal

    signals = DemoSignals()
    signals.install()
    try:
        demo = Demo(options, say_line, signals.deferred)
    except Stopped:  # nothing is started yet
        say_line(signals.why)
        return signals.exit_status or 1
    failed: str | None = None
    try:
        say_line(f"starting opencode, the engine and the scripted model in {demo.base}")
        found = demo.start()
        console = EvolveConsole(Target(found.url, found.token, str(demo.workspace)))

        def say(text: str, severity: str, change: str | None = None) -> None:
            deadline = time.monotonic() + 60
            while not console.is_running and time.monotonic() < deadline:
                time.sleep(0.1)
            if severity == "fixed":  # the warning about the bad edit has been acted on: it goes
                with contextlib.suppress(RuntimeError):
                    console.call_from_thread(console.main.action_close_toasts)
                severity = "information"
            level: Severity = (
                "warning" if severity == "warning" else "error" if severity == "error" else "information"
            )
            # The opening note goes after a while; a notice about a change names it, and the
            # console's keys then select it (j) and revert it (R). None stays more than a minute:
            # the console keeps them (N reads them again).
            alert = Alert(
                text,
                level,
                title="evolve demo",
                timeout=20 if level == "information" else 60,
                change=change,
                revert=change if level == "warning" else None,
            )
            with contextlib.suppress(RuntimeError):  # the console has closed already
                console.call_from_thread(console.alert, alert)

        demo.start_chat(say)
        threading.Thread(
            target=say,
            args=(
                "A scripted model plays the agent here (no LLM, nothing leaves this machine). Watch the "
                "views 1-6; q quits and stops the demo.",
                "information",
                None,
            ),
            daemon=True,
        ).start()
        signals.console_opens(console)
        run_in_terminal(console)
    except Stopped:
        pass
    except (DemoError, opencode_setup.SetupError) as exc:
        failed = str(exc)
    except Exception as exc:  # anything else: still stop what was started, and say what it was
        failed = f"{type(exc).__name__}: {exc}"
    finally:
        signals.stopping()
    if failed is not None:
        say_line(failed)
        # Keep what shows why (the logs), not an empty directory.
        demo.keep = demo.keep or any(demo.base.glob("*.log"))
    stopped = demo.stop()
    if failed is not None:
        say_line(stopped)
        return 1
    say_line(stopped if signals.received is None else f"{signals.why}; {stopped}")
    if demo.driver_error:
        say_line(f"the chat had stopped early: {demo.driver_error}")
    return signals.exit_status or 0
