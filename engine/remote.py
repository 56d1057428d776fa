"""Being reached from another machine, safely: the rules `evolve serve` holds to before it listens
anywhere but loopback.

The engine's own address (the one `state/engine.json` announces, where the plugin and the command
line reach it) is always on loopback. `--listen HOST:PORT` adds a second address for consoles
elsewhere, and only with a token the operator chose (`--token-file`, the same token on both sides)
and TLS (`--tls-cert`, `--tls-key`), unless the operator says the address is inside a tunnel or a
private network they trust (`--behind-tunnel`). The safest way needs none of it: an SSH port-forward
to the loopback address (docs/reliability.md, "Reaching an engine from elsewhere").
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path

MIN_TOKEN = 24  # characters: a token chosen by hand is short; a generated one is 43


class RefusedListen(ValueError):
    """What the operator asked for would expose the engine; the message says what to add instead."""


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or `localhost`) is reachable only from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


@dataclass(frozen=True)
class Listen:
    """A second address to listen on, for consoles elsewhere."""

    host: str
    port: int
    certfile: Path | None = None
    keyfile: Path | None = None
    tunnel: bool = False  # the operator says the address is private (a tunnel, a VPN)

    @property
    def tls(self) -> bool:
        return self.certfile is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT` (`[::]:PORT` for IPv6) as a host and a port."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RefusedListen(f"--listen {text}: expected HOST:PORT, such as 0.0.0.0:8765 or [::]:8765")
    return host.strip("[]"), int(port)


def read_token(path: Path) -> str:
    """The token in `path`: its first line, at least MIN_TOKEN characters, in a file only its owner
    can read (as ssh insists for keys: a token others can read is a token others have)."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RefusedListen(f"--token-file {path}: cannot be read: {exc.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RefusedListen(f"--token-file {path}: others can read it; chmod 600 {path}")
    lines = text.strip().splitlines()
    token = lines[0].strip() if lines else ""
    if len(token) < MIN_TOKEN or any(ch.isspace() for ch in token):
        raise RefusedListen(
            f"--token-file {path}: the token must be one word of at least {MIN_TOKEN} characters; make one "
            f"with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > {path}"
        )
    return token


def check(
    host: str,
    listen: str | None,
    token_file: Path | None,
    certfile: Path | None,
    keyfile: Path | None,
    tunnel: bool,
) -> Listen | None:
    """The second address `evolve serve` listens on (None: loopback only), once what the operator
    gave is safe; RefusedListen saying what is missing otherwise."""
    if not is_loopback(host):
        raise RefusedListen(
            f"--host {host}: the engine's own address stays on loopback, where the plugin and the command "
            "line reach it; to be reached from elsewhere add --listen HOST:PORT (with --token-file and TLS)"
        )
    if (certfile is None) != (keyfile is None):
        raise RefusedListen("TLS needs both --tls-cert and --tls-key")
    if listen is None:
        if certfile is not None or tunnel:
            raise RefusedListen("--tls-cert, --tls-key and --behind-tunnel are for --listen HOST:PORT")
        return None
    address, port = parse_address(listen)
    if not is_loopback(address):
        if token_file is None:
            raise RefusedListen(
                f"--listen {listen}: an engine reachable from elsewhere needs a token you chose and copy to "
                "the console's machine: --token-file FILE"
            )
        if certfile is None and not tunnel:
            raise RefusedListen(
                f"--listen {listen}: refused without TLS, which would send the token in the clear; give "
                "--tls-cert and --tls-key, or --behind-tunnel if the address is inside a tunnel or a private "
                "network you trust (or listen on loopback only and use an SSH port-forward)"
            )
    for given in (certfile, keyfile):
        if given is not None and not os.access(given, os.R_OK):
            raise RefusedListen(f"{given}: cannot be read (a TLS certificate or key)")
    return Listen(address, port, certfile, keyfile, tunnel)


def tls_context(listen: Listen) -> ssl.SSLContext:
    """The server side of TLS for `listen` (TLS 1.2 at least); RefusedListen when the files do not
    make a certificate and its key."""
    assert listen.certfile is not None and listen.keyfile is not None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(listen.certfile, listen.keyfile)
    except (ssl.SSLError, OSError) as exc:
        raise RefusedListen(
            f"--tls-cert {listen.certfile} --tls-key {listen.keyfile}: not a certificate and its key ({exc})"
        ) from None
    return context
