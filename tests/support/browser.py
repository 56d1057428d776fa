"""A real headless Chromium (Debian's `chromium`), driven over its DevTools protocol with aiohttp's
WebSocket client: a page to open, keys to type, what its WebSockets received, a screenshot.

Used by the web console's test and by scripts/screenshots_web.py. The browser runs with a fresh
profile in a temporary directory of the caller's and nothing of the network beyond the page.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM_TEMP = "org.chromium.Chromium.*"  # what Chromium makes in TMPDIR
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--no-default-browser-check",
    "--remote-debugging-port=0",
)


def chromium() -> str | None:
    """The browser's program, if it is installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Page:
    """One page of the browser, over its DevTools WebSocket."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.frames: list[bytes] = []  # what the page's WebSockets received, in order
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.socket:
            if message.type is not aiohttp.WSMsgType.TEXT:
                continue
            data = message.json()
            if "id" in data:
                future = self._waiting.pop(data["id"], None)
                if future is not None and not future.done():
                    future.set_result(data)
            elif data.get("method") == "Network.webSocketFrameReceived":
                response = data["params"]["response"]
                payload = response["payloadData"]
                # Binary frames (the terminal's bytes) come base64-encoded; text frames as they are.
                self.frames.append(base64.b64decode(payload) if response["opcode"] == 2 else payload.encode())

    async def send(self, method: str, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """A DevTools command; its result (AssertionError with the browser's error otherwise)."""
        number = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[number] = future
        await self.socket.send_json({"id": number, "method": method, "params": params})
        answer = await asyncio.wait_for(future, timeout)
        if "error" in answer:
            raise AssertionError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    async def open(self, url: str) -> None:
        await self.send("Network.enable")
        await self.send("Page.enable")
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        answer = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return answer.get("result", {}).get("value")

    async def press(self, key: str) -> None:
        """A key typed as a person types it: down (with its text) and up."""
        await self.send("Input.dispatchKeyEvent", type="keyDown", key=key, text=key, unmodifiedText=key)
        await self.send("Input.dispatchKeyEvent", type="keyUp", key=key)

    async def screenshot(self) -> bytes:
        return base64.b64decode((await self.send("Page.captureScreenshot", format="png"))["data"])

    def received(self, since: int = 0) -> str:
        """The text of what the page's WebSockets received (from frame `since`), without escapes."""
        raw = b"".join(self.frames[since:]).decode("utf-8", "replace")
        return re.sub(r"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]", "", raw)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self.socket.close()


@contextlib.asynccontextmanager
async def headless_page(profile: Path, size: tuple[int, int] = (1280, 800)) -> AsyncIterator[Page]:
    """A page of a new headless Chromium whose profile is `profile` (a fresh directory); the browser
    is ended when the block ends."""
    program = chromium()
    assert program is not None, "chromium is not installed (apt-get install chromium)"
    profile.mkdir(parents=True, exist_ok=True)
    # Chromium leaves directories of its own in TMPDIR (org.chromium.Chromium.*, holding its
    # singleton socket, whose path must stay short: not a directory deeper in the test's own):
    # those that are new when it ends are removed.
    temp = Path(tempfile.gettempdir())
    before = set(temp.glob(CHROMIUM_TEMP))
    # Its own HOME beside the profile: Chromium writes ~/.config/chromium and ~/.cache/dconf even
    # with a profile of its own.
    home = profile.with_name(profile.name + "-home")
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")} | {"HOME": str(home)}
    proc = subprocess.Popen(
        [program, *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}", "about:blank"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text().strip():
            assert proc.poll() is None, f"chromium exited {proc.returncode} at start"
            assert time.monotonic() < deadline, "chromium did not open its DevTools port in 30 s"
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{port}/json/list") as resp:
                targets = await resp.json()
            page_url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            socket = await http.ws_connect(page_url, max_msg_size=0)
            page = Page(socket)
            try:
                yield page
            finally:
                await page.close()
    finally:
        # Its own session: the browser and its helper processes, ended together.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        for left in set(temp.glob(CHROMIUM_TEMP)) - before:
            shutil.rmtree(left, ignore_errors=True)
