"""How a failure is told (engine.failures): the error's own last line rather than only `exit 1`, where
in the workspace a traceback points, the files an error names, and the cause in words."""

from __future__ import annotations

from pathlib import Path

from engine.failures.errorline import error_line, where
from engine.failures.suspects import ago, cause_text, named_files
from engine.protocol.records import Suspect

TRACEBACK = """Traceback (most recent call last):
  File "{root}/hooks/notes.py", line 434, in <module>
    sys.exit(main(sys.argv))
  File "{root}/hooks/notes.py", line 329, in stage_heartbeat
    count = "You have " + len(notes) + " notes."
            ~~~~~~~~~~~~^~~~~~~~~~~~
TypeError: can only concatenate str (not "int") to str
"""


def test_the_error_line_is_the_exception_a_traceback_ends_with(tmp_path: Path) -> None:
    stderr = TRACEBACK.format(root=tmp_path)
    assert error_line(stderr, "exit 1") == 'TypeError: can only concatenate str (not "int") to str'
    assert where(stderr, tmp_path) == "hooks/notes.py:329"


def test_other_languages_and_no_exception_at_all() -> None:
    node = "file:///ws/hooks/a.mjs:3\n  x()\n  ^\n\nTypeError: x is not a function\n    at main (a.mjs:3:3)\n"
    assert error_line(node, "exit 1") == "TypeError: x is not a function"
    assert error_line("json.decoder.JSONDecodeError: Expecting value: line 1 column 1\n", "exit 1") == (
        "json.decoder.JSONDecodeError: Expecting value: line 1 column 1"
    )
    assert error_line("hooks/x.sh: line 3: jq: command not found\n", "exit 127") == (
        "hooks/x.sh: line 3: jq: command not found"
    ), "without an exception, the last line it printed"
    assert error_line("", "timeout: ran longer than 30000 ms") == "timeout: ran longer than 30000 ms"
    assert len(error_line("ValueError: " + "x" * 1000, None)) == 300


def test_the_files_an_error_names_are_those_of_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "flag.txt").write_text("bad")
    (tmp_path / "hooks").mkdir()
    (tmp_path / "hooks" / "lib.py").write_text("")
    text = (
        f'File "{tmp_path}/hooks/lib.py", line 3\n'
        "ValueError: data/flag.txt says bad; see /usr/lib/python3/json/__init__.py and notes/missing.json"
    )
    assert named_files(text, tmp_path) == ["hooks/lib.py", "data/flag.txt"]


def test_the_cause_in_words() -> None:
    suspect = Suspect(
        sha="7a46fd1e" * 5, subject="update notes", origin="agent", at=100.0, before_s=62.0,
        session="ses_1", session_title="Errands",
    )  # fmt: skip
    assert cause_text(suspect, "heartbeat", None, 162.0) == (
        'since 7a46fd1, agent, 1 min before the first failure, session "Errands"'
    )
    assert cause_text(None, "heartbeat", 100.0, 4000.0) == (
        "no change explains it: nothing it depends on (its file, the files its error names, the prompts, "
        "the config) changed since it last ran fine at heartbeat, 65 min before the first failure"
    )
    assert [ago(s) for s in (0.2, 40, 89, 600, 7200, 200_000)] == [
        "less than a second", "40 s", "1 min", "10 min", "2 h", "2 days",
    ]  # fmt: skip
