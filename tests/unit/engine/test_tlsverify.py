"""Which HTTP clients check certificates (engine/protocol/tlsverify.py)."""

from __future__ import annotations

from engine.protocol.tlsverify import verify_for


def test_certificates_are_checked_for_https_only() -> None:
    assert verify_for("https://engine.example:8443") is True
    assert verify_for("HTTPS://engine.example") is True  # a scheme is case-insensitive
    assert verify_for("http://127.0.0.1:4096") is False  # no TLS: no certificate store loaded
    assert verify_for("http://https.example/") is False
