#!/usr/bin/env python3
"""The web console's screenshot: `evolve console --web` with two agents, drawn by a real headless
Chromium, saved as screenshots/web.png.

What it does: makes two example workspaces (`evolve init`) in a temporary directory, serves the
console of both with `evolve console --web` (which starts their engines), opens it in headless
Chromium (Debian's `chromium`, driven over its DevTools protocol: tests/support/browser.py), waits
for the fleet view to be drawn, saves the page as PNG, and stops everything it started.

Run from the project root:  .venv/bin/python scripts/screenshot_web.py [--out screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages, also when evolve is installed elsewhere

from tests.support.browser import headless_page  # noqa: E402

EVOLVE = [sys.executable, "-m", "engine"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def shoot(url: str, password: str, profile: Path, out: Path) -> None:
    async with headless_page(profile, size=(1400, 800)) as page:
        await page.open(f"{url}/?token={password}")
        deadline = time.monotonic() + 60
        while "2 agents: 2 up" not in page.received():
            if time.monotonic() > deadline:
                raise RuntimeError("the fleet view was not drawn within 60 s")
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.5)  # the terminal's last frame painted
        out.write_bytes(await page.screenshot())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "screenshots"))
    args = parser.parse_args()
    out = Path(args.out) / "web.png"
    with tempfile.TemporaryDirectory(prefix="evolve-web-shot-") as tmp:
        base = Path(tmp)
        env = {**os.environ, "HOME": str(base / "home"), "XDG_CONFIG_HOME": str(base / "config")}
        workspaces = [base / "notes", base / "persona"]
        for ws in workspaces:
            subprocess.run([*EVOLVE, "init", str(ws)], env=env, cwd=ROOT, check=True, capture_output=True)
        password = secrets.token_urlsafe(18)
        secret = base / "web.password"
        secret.write_text(password)
        secret.chmod(0o600)
        port = free_port()
        command = [*EVOLVE, "console", "--web", "--web-port", str(port), "--web-token-file", str(secret)]
        for ws in workspaces:
            command += ["--workspace", str(ws)]
        server = subprocess.Popen(
            command,
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    httpx.get(url, trust_env=False, timeout=2)
                    break
                time.sleep(0.1)
            asyncio.run(shoot(url, password, base / "chromium", out))
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            server.wait(15)
            for ws in workspaces:
                subprocess.run(
                    [*EVOLVE, "stop", "--workspace", str(ws)], env=env, cwd=ROOT, capture_output=True
                )
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
