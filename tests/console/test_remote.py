"""An engine reached from elsewhere: `evolve serve` refuses to listen beyond loopback without a token
and TLS, serves a second address with the operator's token and certificate, and the console says
plainly when the token is wrong or the certificate is not the one it trusts."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

from engine.protocol import calls
from evolve_console.client import EngineClient, EngineError, EngineGone, Target
from tests.support.engine_process import EngineProcess
from tests.support.environment import EVOLVE, REPO
from tests.support.processes import free_port


def certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made by openssl."""
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def test_serve_refuses_an_address_elsewhere_without_a_token_or_tls(
    workspace: Path, isolated_env: dict[str, str], tmp_path: Path
) -> None:
    token = tmp_path / "engine.token"
    token.write_text("t" * 43)
    token.chmod(0o600)
    for args, said in [
        (["--host", "0.0.0.0"], "the engine's own address stays on loopback"),
        (["--listen", "0.0.0.0:1"], "needs a token you chose"),
        (["--listen", "0.0.0.0:1", "--token-file", str(token)], "refused without TLS"),
    ]:
        proc = subprocess.run(
            [*EVOLVE, "serve", "--workspace", str(workspace), *args],
            env=isolated_env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr
        assert said in proc.stderr
        assert not (workspace / "state" / "engine.json").exists(), "nothing started"


def test_a_second_address_with_tls_and_the_operators_token_and_what_the_console_says_when_wrong(
    workspace: Path, tmp_path: Path, isolated_env: dict[str, str]
) -> None:
    cert, key = certificate(tmp_path, "engine")
    stranger, _ = certificate(tmp_path, "stranger")
    token = tmp_path / "engine.token"
    token.write_text("operator-chosen-token-0123456789abcdef\n")
    token.chmod(0o600)
    port = free_port()
    engine = EngineProcess(workspace, isolated_env, tmp_path / "engine.log").start(
        args=[
            "--listen",
            f"127.0.0.1:{port}",
            "--token-file",
            str(token),
            "--tls-cert",
            str(cert),
            "--tls-key",
            str(key),
        ]
    )
    try:
        assert engine.token == "operator-chosen-token-0123456789abcdef", "the token of the file, announced"
        url = f"https://127.0.0.1:{port}"

        async def ask(target: Target) -> str:
            client = EngineClient(target)
            try:
                health = await client.send(calls.health(), 10)
                return f"ok {health.workspace}"
            except (EngineError, EngineGone) as exc:
                return str(exc)
            finally:
                await client.aclose()

        assert asyncio.run(ask(Target(url, engine.token, ca=str(cert)))) == f"ok {workspace}"
        wrong_token = asyncio.run(ask(Target(url, "not-the-token", ca=str(cert))))
        assert "refused the token" in wrong_token
        wrong_cert = asyncio.run(ask(Target(url, engine.token, ca=str(stranger))))
        assert "its certificate does not match" in wrong_cert
        plain = asyncio.run(ask(Target(f"http://127.0.0.1:{port}", engine.token)))
        assert "does not answer" in plain, "plain HTTP to the TLS address gets nothing"
    finally:
        engine.stop()
