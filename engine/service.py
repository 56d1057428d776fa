"""`evolve serve`: one long-lived engine per workspace, announced in `state/engine.json`
(protocol.announcement). A lock file makes sure a second engine for the same workspace refuses to
start."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from . import __version__
from .protocol.announcement import Announcement
from .protocol.api import API_VERSION
from .workspace import Workspace

log = logging.getLogger("evolve.service")


class AlreadyRunning(RuntimeError):
    pass


def acquire_lock(ws: Workspace) -> int:
    """An exclusive lock held for the engine's life; the kernel drops it if the process dies."""
    ws.state_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(ws.state_dir / "engine.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        found = Announcement.read(ws.root)
        where = f" (pid {found.pid}, {found.url})" if found else ""
        raise AlreadyRunning(f"an engine already runs for {ws.root}{where}") from None
    return fd


def running(root: Path, timeout: float = 2.0) -> Announcement | None:
    """The engine announced for this workspace, if it answers its health check."""
    found = Announcement.read(root)
    return found if found is not None and found.alive(timeout) else None


async def serve(
    root: Path, host: str = "127.0.0.1", port: int = 0, ready: Callable[[Announcement], None] | None = None
) -> int:
    """Run the engine and its API until SIGTERM/SIGINT or a shutdown request."""
    import uvicorn

    from .api import build_app
    from .runtime import Engine

    ws = Workspace(root)
    lock_fd = acquire_lock(ws)
    engine = Engine(root)
    token = secrets.token_urlsafe(32)
    # IPPROTO_TCP explicitly: asyncio turns TCP_NODELAY on only for sockets that say so, and
    # without it every response body waits ~40 ms for the client's delayed ACK.
    sock = socket.socket(
        socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
    )
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound_port}"
    config = uvicorn.Config(
        build_app(engine, token),
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=3,
    )
    server = uvicorn.Server(config)
    announcement = Announcement(url, token, os.getpid(), __version__, API_VERSION, str(root))
    loop = asyncio.get_running_loop()
    try:
        await engine.start(watch=True, heartbeat=True)
        announcement.write()
        # Not a warning: the one line a person starting the engine by hand wants to see.
        print(
            f"evolve: engine for {root} listening on {url} (pid {os.getpid()})", file=sys.stderr, flush=True
        )
        if ready is not None:
            ready(announcement)
        serve_task = asyncio.create_task(server.serve(sockets=[sock]))
        stop = asyncio.create_task(engine.shutdown_requested.wait())
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, engine.request_shutdown)
        await asyncio.wait({serve_task, stop}, return_when=asyncio.FIRST_COMPLETED)
        server.should_exit = True
        await asyncio.gather(serve_task, return_exceptions=True)
        stop.cancel()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        announcement.remove()
        await engine.close()
        os.close(lock_fd)
    return 0
