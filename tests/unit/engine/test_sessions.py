"""Session histories kept in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def test_only_the_most_recently_active_histories_stay_in_memory(tmp_path: Path, monkeypatch: Any) -> None:
    """Histories are large and replaced on every request: the engine keeps the newest few in memory
    and reads the others back from the journal, whole, when they are asked for."""
    from engine.journal.store import Journal
    from engine.opencode import sessions as sessions_module
    from engine.opencode.sessions import SessionStore

    monkeypatch.setattr(sessions_module, "HISTORIES_KEPT", 2)
    journal = Journal(tmp_path / "journal.sqlite")
    store = SessionStore(journal, lambda change: None)

    def history_of(n: int) -> list[Any]:
        return [{"role": "user", "parts": [{"type": "text", "text": f"message {n} " + "x" * 1000}]}]

    for n in range(5):
        store.set_history(f"ses_{n}", history_of(n))
        store.flush()  # written: now it may leave memory
    in_memory = [s.id for s in store.known() if s.history is not None]
    assert len(in_memory) <= 3 and "ses_4" in in_memory and "ses_0" not in in_memory, in_memory
    # Read back whole, and counted as before.
    assert store.history("ses_0") == history_of(0)
    info = store.info("ses_1", with_history=True)
    assert info is not None and info.history == history_of(1) and info.history_length == 1
    assert all(s.history_length == 1 for s in store.known())
    # A history that left memory is not overwritten by the next write of its session.
    store.update("ses_2", title="still here")
    store.flush()
    row = journal.session("ses_2")
    assert row is not None and row["history"] == history_of(2) and row["title"] == "still here"
    journal.close()
    # A restarted store keeps the newest few in memory; the rest come from the journal.
    again = SessionStore(Journal(tmp_path / "journal.sqlite"), lambda change: None)
    assert sum(s.history is not None for s in again.known()) == 2
    assert again.history("ses_0") == history_of(0)


def test_a_history_sent_again_keeps_the_messages_it_had(tmp_path: Path) -> None:
    """opencode sends the whole history at every step: the messages the session had keep their
    objects (whose JSON text is kept), the new ones are taken, and an equal history changes nothing."""
    from engine.core import jsontext
    from engine.journal.store import Journal
    from engine.opencode.sessions import SessionStore

    def message(n: int) -> dict[str, Any]:
        return {"role": "user", "agent": "build", "parts": [{"type": "text", "text": f"message {n}"}]}

    journal = Journal(tmp_path / "journal.sqlite")
    try:
        store = SessionStore(journal, lambda change: None)
        store.set_history("ses_1", [message(0), message(1)])
        first = store.history("ses_1")
        store.set_history("ses_1", [message(0), message(1), message(2)])
        grown = store.history("ses_1")
        assert grown == [message(0), message(1), message(2)]
        assert grown[0] is first[0] and grown[1] is first[1]
        assert jsontext.kept_text(grown) == jsontext.strictjson.dumps(grown)
        store.set_history("ses_1", [message(0), message(1), message(2)])
        assert store.history("ses_1") is grown  # equal: nothing changed
        store.set_history("ses_1", [message(0), message(9)])  # rewritten (a compaction, an edit)
        assert store.history("ses_1") == [message(0), message(9)]
        assert store.history("ses_1")[0] is first[0]
    finally:
        journal.close()
