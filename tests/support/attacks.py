"""What the attack tests of the reliability promises share: engines started as processes (stopped, or
killed, at the end of the test whatever happened), hooks written as files, processes a test's hooks
report by pid file (ended at the end of the test if the engine did not end them), and reading the
journal of a workspace whose engine is a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.engine_process import EngineProcess
from tests.support.environment import REPO, isolated_env
from tests.support.processes import pid_alive


def write(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


class Engines:
    """Engine processes of one test, and the pids its hooks wrote into `pids/`: everything is
    stopped or killed by `close`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.pids = tmp / "pids"
        self.pids.mkdir(exist_ok=True)
        self.started: list[EngineProcess] = []

    def env(self, **extra: str) -> dict[str, str]:
        return isolated_env(self.tmp / "home", PYTHONPATH=str(REPO), EVOLVE_TEST_PIDS=str(self.pids), **extra)

    def start(self, ws: Path, **extra: str) -> EngineProcess:
        engine = EngineProcess(ws, self.env(**extra), self.tmp / "engine.log")
        self.started.append(engine)
        return engine.start()

    def reported(self, name: str) -> int | None:
        """The pid a hook wrote to `pids/<name>`, once it is there."""
        try:
            text = (self.pids / name).read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def close(self) -> None:
        for engine in self.started:
            with contextlib.suppress(Exception):
                engine.stop()
        for path in self.pids.iterdir():
            text = path.read_text(errors="replace").strip()
            if text.isdigit() and pid_alive(int(text)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(text), signal.SIGKILL)


def engines(tmp: Path) -> Iterator[Engines]:
    """For a fixture: `yield from engines(tmp_path)`."""
    found = Engines(tmp)
    try:
        yield found
    finally:
        found.close()


def journal_rows(ws: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of a query on the workspace's journal (read-only, beside a running engine)."""
    path = ws / "state" / "journal.sqlite3"
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)) as db:
        return list(db.execute(sql, params).fetchall())


def warnings_in_journal(ws: Path, source: str) -> list[str]:
    """The messages of the warnings from `source` the workspace's journal holds, oldest first."""
    rows = journal_rows(ws, "SELECT data FROM events WHERE kind = 'warning' ORDER BY started_at")
    found = [json.loads(data).get("data") or {} for (data,) in rows]
    return [str(d.get("message")) for d in found if d.get("source") == source]


def pausing_git(bin_dir: Path, when: list[str], mark: Path, pause: float = 60.0) -> dict[str, str]:
    """A `git` on PATH (in `bin_dir`) that runs the real git, then, when its arguments hold each
    text of `when` in that order, writes its pid to `mark` and sleeps `pause` seconds before it exits: the
    moment for a test to kill the engine that ran it (put `mark` in Engines.pids, so that the
    sleeping git is ended with the test). Returns the environment that puts it first on PATH."""
    import shutil

    real = shutil.which("git")
    assert real is not None, "git is not installed"
    pattern = "*" + "*".join('"' + part.replace('"', '\\"') + '"' for part in when) + "*"
    write(
        bin_dir / "git",
        f"""#!/bin/sh
"{real}" "$@"
status=$?
case "$*" in
  {pattern}) echo $$ > "{mark}"; sleep {pause} ;;
esac
exit $status
""",
    )
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
