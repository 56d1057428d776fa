"""What `evolve serve` accepts before it listens anywhere but loopback: its own address on loopback,
a second address elsewhere only with a token of the operator's (in a file only they can read) and
TLS, unless they say the address is inside a tunnel."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.remote import Listen, RefusedListen, check, is_loopback, parse_address, read_token

TOKEN = "x" * 43


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "engine.token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    # Readable files are all `check` asks for; whether they make a certificate is tls_context's.
    pem, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    pem.write_text("certificate")
    key.write_text("key")
    return pem, key


def test_loopback_addresses_and_names() -> None:
    assert (
        is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]") and is_loopback("localhost")
    )
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.2") and not is_loopback("server.example")
    assert parse_address("[::]:8765") == ("::", 8765)
    with pytest.raises(RefusedListen, match="expected HOST:PORT"):
        parse_address("0.0.0.0")


def test_loopback_only_by_default_and_the_engines_own_address_never_elsewhere(token_file: Path) -> None:
    assert check("127.0.0.1", None, None, None, None, tunnel=False) is None
    with pytest.raises(RefusedListen, match=r"stays on loopback.*add --listen HOST:PORT"):
        check("0.0.0.0", None, token_file, None, None, tunnel=False)


def test_elsewhere_needs_a_token_and_tls_or_the_operators_word_that_it_is_a_tunnel(
    token_file: Path, cert: tuple[Path, Path]
) -> None:
    with pytest.raises(RefusedListen, match=r"needs a token you chose.*--token-file FILE"):
        check("127.0.0.1", "0.0.0.0:8765", None, *cert, tunnel=False)
    with pytest.raises(RefusedListen, match=r"refused without TLS.*--behind-tunnel"):
        check("127.0.0.1", "0.0.0.0:8765", token_file, None, None, tunnel=False)
    with pytest.raises(RefusedListen, match="both --tls-cert and --tls-key"):
        check("127.0.0.1", "0.0.0.0:8765", token_file, cert[0], None, tunnel=False)
    assert check("127.0.0.1", "0.0.0.0:8765", token_file, *cert, tunnel=False) == Listen(
        "0.0.0.0", 8765, *cert
    )
    tunnel = check("127.0.0.1", "10.0.0.2:8765", token_file, None, None, tunnel=True)
    assert tunnel == Listen("10.0.0.2", 8765, tunnel=True) and tunnel.url == "http://10.0.0.2:8765"
    # A second loopback address (for a port-forward's end) needs none of it.
    assert check("127.0.0.1", "127.0.0.1:9000", None, None, None, tunnel=False) == Listen("127.0.0.1", 9000)


def test_a_token_must_be_long_and_readable_by_its_owner_only(token_file: Path) -> None:
    assert read_token(token_file) == TOKEN
    token_file.chmod(0o640)
    with pytest.raises(RefusedListen, match="others can read it; chmod 600"):
        read_token(token_file)
    token_file.chmod(0o600)
    token_file.write_text("short\n")
    with pytest.raises(RefusedListen, match="at least 24 characters"):
        read_token(token_file)
