"""The journal's sessions: histories in a table of their own (read when asked for, never listed), the
sessions' share of `journal_max_bytes`, and a journal of the previous version migrated."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from engine.journal.schema import SCHEMA_V1, SCHEMA_V2, SCHEMA_V3
from engine.journal.sessions import SESSIONS_SHARE, SESSIONS_TRIM_TO
from engine.journal.store import SCHEMA_VERSION, Journal


def history(n: int, size: int = 1000) -> list[dict[str, object]]:
    return [{"role": "user", "parts": [{"type": "text", "text": f"{n}:" + "x" * size}]}]


def test_a_listing_holds_no_history_and_one_session_holds_its_own(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3") as journal:
        journal.save_session("ses_1", title="one", history=history(1) * 3)
        journal.save_session("ses_1", title="renamed")  # a history not given is left as it is
        (listed,) = journal.sessions()
        assert "history" not in listed and listed["history_length"] == 3 and listed["title"] == "renamed"
        one = journal.session("ses_1")
        assert one is not None and one["history"] == history(1) * 3
        journal.save_session("ses_1", history=[])
        one = journal.session("ses_1")
        assert one is not None and one["history"] == [] and one["history_length"] == 0


def test_sessions_keep_to_their_share_oldest_histories_first(tmp_path: Path) -> None:
    limit = 400_000
    with Journal(tmp_path / "j.sqlite3", max_bytes=limit) as journal:
        for n in range(30):
            journal.save_session(f"ses_{n:02d}", title=f"t{n}", history=history(n, 20_000))
        assert journal.sessions_bytes <= SESSIONS_SHARE * limit
        kept = {s["id"] for s in journal.sessions(100) if s["history_length"]}
        assert "ses_29" in kept and "ses_00" not in kept  # the least recently active went first
        assert len(journal.sessions(100)) == 30  # their facts stay
        dropped = journal.session("ses_00")
        assert dropped is not None and dropped["history"] == [] and dropped["title"] == "t0"
        assert journal.sessions_bytes >= SESSIONS_TRIM_TO * SESSIONS_SHARE * limit - 25_000


def test_a_history_larger_than_the_share_is_not_kept(tmp_path: Path) -> None:
    with Journal(tmp_path / "j.sqlite3", max_bytes=100_000) as journal:
        journal.save_session("ses_big", title="big", history=history(1, 80_000))
        one = journal.session("ses_big")
        assert one is not None and one["title"] == "big" and one["history"] == []


def test_a_journal_of_the_previous_version_has_its_histories_moved(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA_V1 + SCHEMA_V2 + SCHEMA_V3)
        conn.execute("PRAGMA user_version = 3")
        data = {"title": "old", "history": history(7) * 2, "notifications": []}
        conn.execute(
            "INSERT INTO sessions (id, system, updated_at, data) VALUES ('ses_old', '[\"p\"]', 5.0, ?)",
            (json.dumps(data),),
        )
    with Journal(path) as journal:
        (listed,) = journal.sessions()
        assert listed["title"] == "old" and listed["history_length"] == 2 and "history" not in listed
        one = journal.session("ses_old")
        assert one is not None and one["history"] == history(7) * 2 and one["system"] == ["p"]
        assert journal.sessions_bytes > 2000
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        (stored,) = conn.execute("SELECT data FROM sessions").fetchone()
        assert "history" not in json.loads(stored)  # moved to its own table
