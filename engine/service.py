"""`evolve serve`: one long-lived engine per workspace, announced in `state/engine.json`
(protocol.announcement). Locks make sure a second engine for the same workspace refuses to start, and
an engine whose workspace is deleted under it notices and stops."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets
import signal
import socket
import ssl
import sys
from collections.abc import Callable
from pathlib import Path

from engine import __version__
from engine.protocol.announcement import Announcement
from engine.protocol.api import API_VERSION
from engine.remote import Listen, tls_context
from engine.workspace.layout import Workspace

log = logging.getLogger("evolve.service")


class AlreadyRunning(RuntimeError):
    pass


class EngineLock:
    """The locks an engine holds for its life; the kernel drops them if the process dies."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []


def _flock(path: Path, flags: int) -> int:
    fd = os.open(path, flags, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def acquire_lock(ws: Workspace) -> EngineLock:
    """Exclusive locks on `state/engine.lock` and on the workspace directory itself, which deleting
    `engine.lock` (a person tidying up, a script) cannot take away."""
    ws.ensure_state_dir()
    fds: list[int] = []
    try:
        fds.append(_flock(ws.state_dir / "engine.lock", os.O_RDWR | os.O_CREAT))
        fds.append(_flock(ws.root, os.O_RDONLY | os.O_DIRECTORY))
    except BlockingIOError:
        EngineLock(fds).release()
        found = Announcement.read(ws.root)
        where = f" (pid {found.pid}, {found.url})" if found else ""
        raise AlreadyRunning(f"an engine already runs for {ws.root}{where}") from None
    return EngineLock(fds)


WATCH_S = 2.0  # how often the engine checks that its workspace is still there
# How long an idle kept-alive connection stays open. Longer than any client keeps one (httpx 5 s,
# Node's fetch 4 s), so a client always drops it first. With both at 5 s, a request sent as the
# engine closes the connection is lost (11 of 150 requests sent at about that gap, measured), and
# the console polls every 5 s.
KEEP_ALIVE_S = 75


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


async def watch_workspace(ws: Workspace, gone: Callable[[str], None]) -> None:
    """Call `gone(reason)` once the workspace directory or its journal is deleted or replaced (the
    engine would go on writing to files nobody can see)."""
    root, journal = _identity(ws.root), _identity(ws.journal_file)
    while True:
        await asyncio.sleep(WATCH_S)
        if _identity(ws.root) != root:
            gone(f"the workspace {ws.root} was deleted or replaced")
            return
        if journal is not None and _identity(ws.journal_file) != journal:
            gone(f"the journal {ws.journal_file} was deleted or replaced")
            return


def running(root: Path, timeout: float = 2.0) -> Announcement | None:
    """The engine announced for this workspace, if it answers its health check."""
    found = Announcement.read(root)
    return found if found is not None and found.alive(timeout) else None


def _socket(host: str, port: int) -> socket.socket:
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
    return sock


async def serve(
    root: Path,
    host: str = "127.0.0.1",
    port: int = 0,
    ready: Callable[[Announcement], None] | None = None,
    *,
    token: str | None = None,
    listen: Listen | None = None,
) -> int:
    """Run the engine and its API until SIGTERM/SIGINT or a shutdown request; 130 when SIGINT (a
    Ctrl-C) stopped it, else 0. From the first moment, those signals ask for the same orderly stop as
    a shutdown request, also during the start and the stop (a second Ctrl-C cannot cut the stop
    short and leave the announcement or the hooks' interpreters behind). `token`: the one the
    operator chose (else a new random one); `listen`: a second address, for consoles elsewhere
    (engine.remote checked that it is safe)."""
    import uvicorn

    from engine.api import build_app
    from engine.api.onewrite import OneWriteHttpTools
    from engine.runtime import Engine

    ws = Workspace(root)
    lock = acquire_lock(ws)
    engine = Engine(root)
    loop = asyncio.get_running_loop()
    signals: list[int] = []

    def on_signal(sig: int) -> None:
        signals.append(sig)
        engine.request_shutdown()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    token = token or secrets.token_urlsafe(32)
    sock = _socket(host, port)
    bound_port = sock.getsockname()[1]
    url = f"http://{'[' + host + ']' if ':' in host else host}:{bound_port}"
    api = build_app(engine, token)

    def server_for(tls: ssl.SSLContext | None = None) -> uvicorn.Server:
        config = uvicorn.Config(
            api,
            http=OneWriteHttpTools,  # an answer's headers and body in one write
            log_level="warning",
            access_log=False,
            lifespan="off",
            # No X-Forwarded-* rewriting of the client's address: nothing here reads it, and the
            # middleware would look at every request's headers for it.
            proxy_headers=False,
            timeout_graceful_shutdown=3,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        config.load()
        config.ssl = tls  # uvicorn takes certificate files only; this context sets the TLS floor
        return uvicorn.Server(config)

    # The second address gets a server of its own: uvicorn has one TLS setting per server, and the
    # loopback address the plugin uses stays plain HTTP.
    servers = [(server_for(), sock)]
    if listen is not None:
        servers.append(
            (server_for(tls_context(listen) if listen.tls else None), _socket(listen.host, listen.port))
        )
    announcement = Announcement(url, token, os.getpid(), __version__, API_VERSION, str(root))
    watching: asyncio.Task[None] | None = None

    def gone(reason: str) -> None:
        log.error("%s: the engine stops (start it again once the workspace is back)", reason)
        engine.request_shutdown()

    try:
        await engine.start(watch=True, heartbeat=True)
        watching = asyncio.create_task(watch_workspace(ws, gone))
        announcement.write()
        # Not a warning: the one line a person starting the engine by hand wants to see.
        print(
            f"evolve: engine for {root} listening on {url} (pid {os.getpid()})", file=sys.stderr, flush=True
        )
        if listen is not None:
            how = "TLS" if listen.tls else "no TLS: behind a tunnel, as the operator said"
            print(f"evolve: also listening on {listen.url} ({how})", file=sys.stderr, flush=True)
        if ready is not None:
            ready(announcement)
        if not engine.shutdown_requested.is_set():  # a signal during the start: stop at once
            tasks = {asyncio.create_task(server.serve(sockets=[s])) for server, s in servers}
            stop = asyncio.create_task(engine.shutdown_requested.wait())
            await asyncio.wait({*tasks, stop}, return_when=asyncio.FIRST_COMPLETED)
            for server, _ in servers:
                server.should_exit = True
            await asyncio.gather(*tasks, return_exceptions=True)
            stop.cancel()
    finally:
        if watching is not None:
            watching.cancel()
        announcement.remove()
        await engine.close()
        lock.release()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 130 if signal.SIGINT in signals else 0
