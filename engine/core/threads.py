"""Blocking work in a thread that a cancel cannot leave half done behind the caller's back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def to_the_end(func: Callable[..., T], *args: object) -> T:
    """`func(*args)` in a thread, waited for to its end even when the task is cancelled meanwhile
    (the cancel is raised after it). A copy of a workspace still being written when its scratch
    directory is removed would otherwise recreate part of that directory, left behind."""
    done = asyncio.ensure_future(asyncio.to_thread(func, *args))
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        await asyncio.wait({done})
        raise
