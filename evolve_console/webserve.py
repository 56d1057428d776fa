"""`evolve console --web`: the same console (every agent, every key) in a browser, with textual-serve.

textual-serve runs the console as a process per browser connection and relays the terminal over a
WebSocket; it has no authentication of its own. This serves it through its own aiohttp application
with one check in front of every route (an aiohttp middleware), rather than a second server or
proxy: one process, one port, and nothing of the page reachable without the password.

- The password is a token (`--web-token-file`, else a new random one printed with the address).
  Opening `/?token=…` or typing it in the form signs the browser in: it gets a session cookie
  (HttpOnly, SameSite=Strict) and the token leaves the address bar. A wrong one waits a second.
- The WebSocket also needs the page's own origin (`Origin` matches `Host`), so that no other site
  open in the same browser can drive the console with the cookie.
- The page names its WebSocket by the address the browser used, so that it works through an SSH
  port-forward (`ssh -L 8765:127.0.0.1:8765 server`) under any local port.
- It listens on loopback unless told otherwise (`--web-host`), and an address elsewhere is refused
  unless the operator says it is inside a tunnel or a private network (`--behind-tunnel`).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import html
import secrets
import shlex
import stat
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from textual_serve.server import Server

COOKIE = "evolve_console"
TOKEN_PARAM = "token"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class WebError(RuntimeError):
    """What keeps the web console from starting, in words."""


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable only from this machine (as engine/remote.py says it for the
    engine: the console imports nothing of the engine but its protocol)."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def read_password(path: Path) -> str:
    """The password in `path` (its first line), in a file only its owner can read."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WebError(f"--web-token-file {path}: cannot be read: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise WebError(f"--web-token-file {path}: others can read it; chmod 600 {path}")
    lines = text.strip().splitlines()
    password = lines[0].strip() if lines else ""
    if len(password) < 12:
        raise WebError(f"--web-token-file {path}: the password must be at least 12 characters")
    return password


class Gate:
    """The check in front of every route: signed in (the session cookie), or the sign-in itself."""

    def __init__(self, password: str) -> None:
        self.password = password.encode()
        # The session cookie's value: a MAC of the password under a key of this run, so a restart
        # signs every browser out and the cookie never holds the password itself.
        self.session = hmac.new(secrets.token_bytes(32), self.password, hashlib.sha256).hexdigest()

    def signed_in(self, request: web.Request) -> bool:
        return hmac.compare_digest(request.cookies.get(COOKIE, ""), self.session)

    def right(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.password)

    def sign_in(self, response: web.StreamResponse, secure: bool) -> web.StreamResponse:
        response.set_cookie(COOKIE, self.session, httponly=True, samesite="Strict", secure=secure, path="/")
        return response

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        secure = request.scheme == "https"
        if request.path == "/login" and request.method == "POST":
            form = await request.post()
            if self.right(str(form.get("password", ""))):
                return self.sign_in(web.HTTPSeeOther("/"), secure)
            await asyncio.sleep(1.0)  # a guess a second, at most
            return login_page("That is not the password.", status=401)
        given = request.query.get(TOKEN_PARAM)
        if given is not None:
            if self.right(given):
                return self.sign_in(web.HTTPSeeOther("/"), secure)  # out of the address bar
            await asyncio.sleep(1.0)
            return login_page("That token is not this console's.", status=401)
        if not self.signed_in(request):
            if request.path == "/":
                return login_page("", status=401)
            return web.Response(status=401, text="sign in first: open / and give the password")
        if request.path == "/ws" and not same_origin(request):
            return web.Response(status=403, text="the console's WebSocket is for its own page only")
        return await handler(request)


def same_origin(request: web.Request) -> bool:
    origin = request.headers.get("Origin", "")
    return origin.split("://", 1)[-1] == request.host


def login_page(message: str, status: int) -> web.Response:
    said = f"<p class=error>{html.escape(message)}</p>" if message else ""
    body = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>evolve console</title>
<style>body{{background:#0c181f;color:#eee;font-family:monospace;display:flex;height:90vh;
align-items:center;justify-content:center}} .error{{color:#f66}} input,button{{font:inherit;padding:.4em}}</style>
</head><body><form method="post" action="/login">
<h1>evolve console</h1>{said}
<p>The password is in the file given with --web-token-file, or was printed when the console started.</p>
<input type="password" name="password" autofocus autocomplete="current-password">
<button type="submit">Sign in</button></form></body></html>"""
    return web.Response(status=status, text=body, content_type="text/html")


class WebConsole(Server):
    """textual-serve's server with the gate in front and a page of its own (no fonts fetched from
    elsewhere; the WebSocket at the address the browser used)."""

    def __init__(self, command: str, host: str, port: int, password: str) -> None:
        super().__init__(command, host=host, port=port, title="evolve console")
        self.gate = Gate(password)

    async def _make_app(self) -> web.Application:
        # textual-serve's one place where its aiohttp application is made (a private method; no
        # public hook exists): the gate goes in front of every route it adds, static files included.
        app = await super()._make_app()
        app.middlewares.append(self.gate.middleware)
        return app

    async def on_startup(self, app: web.Application) -> None:
        pass  # textual-serve prints a banner; the command prints its one line

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page (textual-serve's route "/" calls this), in place of its template's."""
        scheme = "wss" if request.scheme == "https" else "ws"
        size = request.query.get("fontsize", "16")
        font = int(size) if size.isdigit() and 6 <= int(size) <= 48 else 16
        body = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>evolve console</title>
<link rel="stylesheet" href="/static/css/xterm.css">
<script src="/static/js/textual.js"></script>
<style>body{{background:#0c181f;margin:0}} #terminal{{width:100vw;height:100vh}}</style></head>
<body><div id="terminal" class="textual-terminal"
 data-session-websocket-url="{scheme}://{html.escape(request.host)}/ws"
 data-font-size="{font}"></div></body></html>"""
        return web.Response(text=body, content_type="text/html")

    def initialize_logging(self) -> None:
        pass  # the console's own stderr is enough; textual-serve's rich log would fill the terminal


def console_command(args: argparse.Namespace) -> str:
    """The `evolve console` the server runs per browser connection: the same agents, in a terminal
    the browser draws."""
    parts = [sys.executable, "-m", "engine", "console"]
    for workspace in args.workspaces or ([args.workspace] if getattr(args, "workspace", None) else []):
        parts += ["--workspace", str(Path(workspace).expanduser().resolve())]
    for n, url in enumerate(args.attach or []):
        parts += ["--attach", url]
        if args.token_file:
            parts += ["--token-file", str(Path(args.token_file[n]).resolve())]
    if args.token:
        parts += ["--token", args.token]
    if args.ca:
        parts += ["--ca", str(Path(args.ca).resolve())]
    if args.agents:
        parts += ["--agents", str(Path(args.agents).resolve())]
    if args.no_bell:
        parts.append("--no-bell")
    return shlex.join(parts)


def serve_web(args: argparse.Namespace) -> int:
    """Serve the console until interrupted."""
    host, port = args.web_host, args.web_port
    if not is_loopback(host) and not args.behind_tunnel:
        raise WebError(
            f"--web-host {host}: the web console listens on loopback; reach it through an SSH port-forward "
            "(ssh -L 8765:127.0.0.1:8765 this-machine), or add --behind-tunnel if that address is inside a "
            "tunnel or a private network you trust"
        )
    password = read_password(Path(args.web_token_file)) if args.web_token_file else secrets.token_urlsafe(24)
    server = WebConsole(console_command(args), host, port, password)
    shown = f"[{host}]" if ":" in host else host
    print(f"evolve console: serving the console at http://{shown}:{port}/", file=sys.stderr, flush=True)
    if not args.web_token_file:
        print(
            f"evolve console: sign in with this password, or open http://{shown}:{port}/?{TOKEN_PARAM}={password}",
            file=sys.stderr,
            flush=True,
        )
        print(password, flush=True)  # alone on stdout, for a script to read
    server.serve()
    return 0
