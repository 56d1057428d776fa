"""Blocking work in a thread, cancelled: the caller hears of the cancel only once the work has ended,
so that removing what the work writes into cannot race with it (engine/core/threads.py)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from engine.core.threads import to_the_end


def test_a_cancel_is_raised_only_after_the_work_in_the_thread_has_ended(tmp_path: Path) -> None:
    started, release = threading.Event(), threading.Event()

    def copy() -> str:
        started.set()
        release.wait(5)
        (tmp_path / "copy").mkdir()  # what a copy still being written would do after the cancel
        return "copied"

    async def main() -> bool:
        task = asyncio.create_task(to_the_end(copy))
        await asyncio.to_thread(started.wait, 5)
        task.cancel()
        await asyncio.sleep(0.05)
        waited = not task.done()  # the cancel waits for the thread
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return waited

    assert asyncio.run(main())
    assert (tmp_path / "copy").is_dir()


def test_without_a_cancel_the_work_s_answer_and_error_come_back() -> None:
    def fails() -> None:
        raise ValueError("no such commit")

    assert asyncio.run(to_the_end(lambda a, b: a + b, 2, 3)) == 5
    with pytest.raises(ValueError, match="no such commit"):
        asyncio.run(to_the_end(fails))
