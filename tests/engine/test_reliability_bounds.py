"""Bounded everywhere (docs/reliability.md, "Bounded everywhere"): a committed file of 100 MB asked for
as a diff and as a file, one at a time and four at once, from a real engine (`evolve serve`): each
answer is cut at its limit, read in bounded memory (the engine's peak resident memory barely moves),
and quickly (git is stopped at the cut)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.attacks import Engines, engines, write

MIB = 1024 * 1024


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Engines]:
    yield from engines(tmp_path)


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def test_a_huge_file_is_diffed_and_shown_in_bounded_memory(tmp_path: Path, started: Engines) -> None:
    ws = tmp_path / "ws"
    write(ws / "prompts" / "chat.md", "chat\n", 0o644)
    line = b"".join(b"%07d the quick brown fox jumps over the lazy dog\n" % i for i in range(2000))
    with open(ws / "data.txt", "wb") as fh:
        for _ in range(100 * MIB // len(line)):
            fh.write(line)
    engine = started.start(ws)  # its first commit holds the file
    sha = engine.head()
    assert engine.git("show", "--stat", "--format=", sha).strip().startswith("data.txt")
    at_rest = peak_rss(engine.pid)
    started_at = time.monotonic()
    diff = engine.get(f"/v1/changes/{sha}/diff")
    took = time.monotonic() - started_at
    assert diff["truncated"] is True and 1_900_000 < len(diff["diff"]) <= 2_000_000
    assert diff["diff"].startswith("diff --git a/data.txt b/data.txt")
    shown = engine.request("GET", f"/v1/changes/{sha}/file", params={"path": "data.txt"}).json()
    assert shown["truncated"] is True and len(shown["content"]) == 2_000_000 and shown["before"] is None
    one = peak_rss(engine.pid)
    answers: list[int] = []

    def diff_again() -> None:
        answers.append(len(engine.get(f"/v1/changes/{sha}/diff")["diff"]))

    threads = [threading.Thread(target=diff_again) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    four = peak_rss(engine.pid)
    assert len(answers) == 4 and all(a == len(diff["diff"]) for a in answers)
    assert one - at_rest <= 40 * MIB, (at_rest // MIB, one // MIB)  # not the file's 100 MB, nor 3x it
    assert four - at_rest <= 60 * MIB, (at_rest // MIB, four // MIB)
    assert took < 10, took
