"""A workspace deleted under a running engine stays deleted (docs/reliability.md, "After a crash"): the
engine stops within seconds and, until it has, writes nothing that would make the directory again
(`state/`, the journal, a held change), whatever it is asked."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.attacks import Engines, engines, write


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


def remove(ws: Path) -> None:
    """`rm -rf ws`, again until it is gone: until the engine notices, it may still write a file into a
    directory not yet removed (state/ being emptied), as a person's `rm -rf` would find too."""
    for _ in range(50):
        try:
            shutil.rmtree(ws)
        except OSError:
            continue  # only a failed removal is tried again: a directory made again after it is not
        return
    raise AssertionError(f"{ws} could not be removed")


def test_a_deleted_workspace_is_not_made_again(tmp_path: Path, started: Engines) -> None:
    ws = tmp_path / "ws"
    write(ws / "prompts" / "chat.md", "chat\n", 0o644)
    write(ws / "hooks" / "h.sh", "#!/bin/sh\ncat >/dev/null\necho '{}'\n")
    engine = started.start(ws)
    stop = threading.Event()

    def keep_asking() -> None:
        """What makes the engine write its state: pausing the heartbeat (state/evolve.json), stages
        (the journal), a session's history, a tool call."""
        with engine.client(timeout=5) as client:
            while not stop.is_set():
                for method, path, body in [
                    ("POST", "/v1/heartbeat/pause", {}),
                    ("POST", "/v1/heartbeat/resume", {}),
                    ("POST", "/v1/stages/idle", {"context": {}, "session": "ses_d"}),
                    ("POST", "/v1/opencode/system", {"session": "ses_d", "system": ["s"], "history": []}),
                    ("POST", "/v1/tools/evolve_prompt_read/call", {"args": {"prompt": "chat.md"}}),
                ]:
                    try:
                        client.request(method, path, json=body)
                    except httpx.HTTPError:
                        return  # the engine stopped

    asking = threading.Thread(target=keep_asking, daemon=True)
    asking.start()
    remove(ws)
    assert engine.proc is not None
    engine.proc.wait(20)  # it noticed, and stopped
    stop.set()
    asking.join(10)
    assert not ws.exists(), sorted(str(p.relative_to(tmp_path)) for p in ws.rglob("*"))
