"""An Engine in this process, started, handed to a test's coroutine, and closed whatever happens."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from engine.runtime import Engine


def run_engine(
    root: Path,
    body: Callable[[Engine], Awaitable[Any]],
    env: Mapping[str, str] | None = None,
    prepare: Callable[[Engine], None] | None = None,
    *,
    watch: bool = False,
) -> Any:
    """`body(engine)`'s result, with an engine of `root` started for it (`prepare` runs before the
    start, e.g. to replace what delivers notifications; `watch` starts its watcher of hand edits)."""

    async def main() -> Any:
        engine = Engine(root) if env is None else Engine(root, env=dict(env))
        if prepare is not None:
            prepare(engine)
        await engine.start(watch=watch)
        try:
            return await body(engine)
        finally:
            await engine.close()

    return asyncio.run(main())
