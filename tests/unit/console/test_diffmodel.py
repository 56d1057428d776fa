"""The diff model (`evolve_console.diffmodel`) on plain text: what `git show --patch` and the review
gate's diffs look like, read into files, hunks, numbered lines, pairs and changed words."""

from __future__ import annotations

from evolve_console.diffmodel import Line, pair_lines, parse, whole_file
from evolve_console.diffwords import MAX_WORD_TOKENS, changed_spans
from evolve_console.languages import language_for


def marked(text: str, spans: list[tuple[int, int]]) -> list[str]:
    return [text[a:b] for a, b in spans]


# ---- parsing ---------------------------------------------------------------------------------------

MODIFIED = """\
diff --git a/hooks/notes.py b/hooks/notes.py
index 1a2b3c4..5d6e7f8 100755
--- a/hooks/notes.py
+++ b/hooks/notes.py
@@ -10,6 +10,7 @@ def main() -> None:
     data = json.load(sys.stdin)
-    stage = sys.argv[1]
+    stage = sys.argv[1].strip()
+    log(stage)

     if stage == "discover":
         print(json.dumps({"name": NAME}))
@@ -40 +41 @@ def add(text):
-    return text
+    return text.strip()
"""


def test_a_modified_file_reads_into_numbered_lines_and_pairs() -> None:
    diff = parse(MODIFIED)
    [file] = diff.files
    assert (file.old_path, file.new_path, file.status) == ("hooks/notes.py", "hooks/notes.py", "modified")
    assert file.counts() == (3, 2)
    first, second = file.hunks
    assert first.header == "@@ -10,6 +10,7 @@ def main() -> None:"
    assert [(line.kind, line.old, line.new) for line in first.lines] == [
        (" ", 10, 10),
        ("-", 11, None),
        ("+", None, 11),
        ("+", None, 12),
        (" ", 12, 13),  # an empty context line whose space was stripped by an editor
        (" ", 13, 14),
        (" ", 14, 15),
    ]
    assert first.lines[4].text == ""
    assert first.lines[1].partner == 2 and first.lines[2].partner == 1 and first.lines[3].partner is None
    assert first.rows() == [(0, 0), (1, 2), (None, 3), (4, 4), (5, 5), (6, 6)]
    # "@@ -40 +41 @@": a count of one is left out.
    assert (second.old_start, second.old_count, second.new_start, second.new_count) == (40, 1, 41, 1)
    assert [(line.kind, line.old, line.new, line.text) for line in second.lines] == [
        ("-", 40, None, "    return text"),
        ("+", None, 41, "    return text.strip()"),
    ]


def test_added_deleted_renamed_binary_and_mode_changes() -> None:
    text = """\
diff --git a/hooks/new.py b/hooks/new.py
new file mode 100755
index 0000000..e69de29
--- /dev/null
+++ b/hooks/new.py
@@ -0,0 +1,2 @@
+#!/usr/bin/env python3
+print("{}")
diff --git a/prompts/old.md b/prompts/old.md
deleted file mode 100644
index e69de29..0000000
--- a/prompts/old.md
+++ /dev/null
@@ -1 +0,0 @@
-Be brief.
diff --git a/prompts/chat.md b/prompts/talk.md
similarity index 100%
rename from prompts/chat.md
rename to prompts/talk.md
diff --git a/state/blob.bin b/state/blob.bin
index 87ae6b6..22f6b3b 100644
Binary files a/state/blob.bin and b/state/blob.bin differ
diff --git a/hooks/guard.sh b/hooks/guard.sh
old mode 100644
new mode 100755
"""
    added, deleted, renamed, binary, mode = parse(text).files
    assert (added.status, added.path, added.old_path, added.new_mode) == (
        "added",
        "hooks/new.py",
        None,
        "100755",
    )
    assert [(line.kind, line.old, line.new) for line in added.hunks[0].lines] == [
        ("+", None, 1),
        ("+", None, 2),
    ]
    assert (deleted.status, deleted.path, deleted.new_path) == ("deleted", "prompts/old.md", None)
    assert [(line.kind, line.old, line.new) for line in deleted.hunks[0].lines] == [("-", 1, None)]
    assert (renamed.status, renamed.old_path, renamed.new_path, renamed.similarity) == (
        "renamed",
        "prompts/chat.md",
        "prompts/talk.md",
        100,
    )
    assert renamed.hunks == []
    assert binary.binary and binary.hunks == [] and binary.path == "state/blob.bin"
    assert (mode.old_mode, mode.new_mode, mode.status) == ("100644", "100755", "modified")
    assert all(not f.notes for f in (added, deleted, renamed, binary, mode)), "every header line was read"


def test_no_newline_markers_and_crlf_lines() -> None:
    text = (
        "diff --git a/n.txt b/n.txt\n--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n"
        " one\r\n"
        "-two\r\n"
        "\\ No newline at end of file\n"
        "+two\n"
    )
    [file] = parse(text).files
    one, old, new = file.hunks[0].lines
    assert (one.text, one.cr) == ("one", True)
    assert (old.text, old.cr, old.no_newline) == ("two", True, True), (
        "the marker belongs to the line before it"
    )
    assert (new.text, new.cr, new.no_newline) == ("two", False, False)
    assert changed_spans(old.text, new.text) == ([], []), "only the line end changed: no word is marked"


def test_a_bare_diff_of_several_files_and_text_before_it() -> None:
    text = (
        "commit message that is not part of any file\n"
        "--- a/prompts/chat.md\n+++ b/prompts/chat.md\n@@ -1 +1 @@\n-a\n+b\n"
        "--- a/prompts/heartbeat.md\n+++ b/prompts/heartbeat.md\n@@ -1 +1,2 @@\n x\n+y\n"
    )
    chat, heartbeat = parse(text).files
    assert (chat.path, heartbeat.path) == ("prompts/chat.md", "prompts/heartbeat.md")
    assert [line.text for line in heartbeat.hunks[0].lines] == ["x", "y"]


def test_paths_with_spaces_and_quoted_paths() -> None:
    text = (
        "diff --git a/my notes.md b/my notes.md\nindex 1..2 100644\nBinary files differ\n"
        'diff --git "a/t\\303\\244b\\tx.md" "b/t\\303\\244b\\tx.md"\n'
        '--- "a/t\\303\\244b\\tx.md"\n+++ "b/t\\303\\244b\\tx.md"\n@@ -1 +1 @@\n-a\n+b\n'
    )
    spaced, quoted = parse(text).files
    assert spaced.path == "my notes.md"
    assert quoted.path == "täb\tx.md"


def test_a_diff_cut_in_the_middle_parses_up_to_the_cut() -> None:
    cut = MODIFIED[: MODIFIED.index("log(stage)") + 3]  # as the engine cuts a patch at 2,000,000 characters
    [file] = parse(cut).files
    [hunk] = file.hunks
    assert [line.text for line in hunk.lines][-2:] == ["    stage = sys.argv[1].strip()", "    log"]


def test_a_huge_diff_is_bounded() -> None:
    lines = 250_000
    text = "--- a/x\n+++ b/x\n@@ -0,0 +1,250000 @@\n" + "+x\n" * lines
    diff = parse(text, max_lines=100_000)
    assert diff.omitted == lines + 3 - 100_000
    assert len(diff.files[0].hunks[0].lines) == 100_000 - 3


# ---- pairs and words ---------------------------------------------------------------------------------


def lines_of(kinds: str) -> list[Line]:
    return [Line(kind, f"{kind}{i}", None, None) for i, kind in enumerate(kinds)]


def test_pairs_only_removed_lines_followed_by_added_ones() -> None:
    only_removed, only_added, mixed = lines_of("--"), lines_of("++"), lines_of(" --+++ -+")
    for group in (only_removed, only_added, mixed):
        pair_lines(group)
    assert [line.partner for line in only_removed] == [None, None]
    assert [line.partner for line in only_added] == [None, None]
    assert [line.partner for line in mixed] == [None, 3, 4, 1, 2, None, None, 8, 7]


def test_a_long_line_changed_mid_way_marks_only_the_changed_words() -> None:
    head = "You are a careful assistant. " * 200
    tail = " Always cite the notes you used. " * 200
    old = head + "Answer plainly and briefly." + tail
    new = head + "Answer tersely, never mention that you changed yourself." + tail
    found = changed_spans(old, new)
    assert found is not None
    old_spans, new_spans = found
    assert marked(old, old_spans) == ["plainly and briefly"]
    assert marked(new, new_spans) == ["tersely, never mention that you changed yourself"]


def test_words_are_marked_whole() -> None:
    old, new = "    stage = sys.argv[1]", "    stage = sys.argv[2].strip()"
    found = changed_spans(old, new)
    assert found is not None
    assert (marked(old, found[0]), marked(new, found[1])) == (["1"], ["2", ".strip()"])
    found = changed_spans("timeout_ms = 30000", "timeout_ms = 3000")
    assert found is not None
    assert (marked("timeout_ms = 30000", found[0]), marked("timeout_ms = 3000", found[1])) == (
        ["30000"],
        ["3000"],
    )


def test_lines_with_little_in_common_are_not_word_marked() -> None:
    assert changed_spans("return notes", "raise SystemExit(2)") is None
    assert changed_spans("same", "same") == ([], [])
    assert changed_spans("", "added text") is None
    found = changed_spans("    return x", "        return x")
    assert found is not None and found[0] == [] and marked("        return x", found[1]) == ["    "]


def test_word_comparison_is_bounded_on_huge_lines() -> None:
    """Past MAX_WORD_TOKENS tokens of difference, the whole differing middle is marked at once
    instead of being compared word by word (which would take quadratic time)."""
    same = "x" * 500_000
    few = changed_spans(same + " a c a c" + same, same + " b c b c" + same)
    assert few is not None and len(few[0]) == 2, "word by word: each changed word on its own"
    units = MAX_WORD_TOKENS // 2  # 4 tokens each: more than MAX_WORD_TOKENS in all
    old, new = same + " a c" * units + same, same + " b c" * units + same
    found = changed_spans(old, new)
    assert found is not None
    middle = (len(same) + 1, len(same) + 4 * units - 2)  # from the first "a" to the last
    assert found == ([middle], [middle])


# ---- the whole file -----------------------------------------------------------------------------------


def test_whole_file_puts_the_hunks_among_every_line_of_the_file() -> None:
    after = "".join(f"l{i}\n" for i in range(1, 11)).replace("l5", "L5").replace("l9\n", "")
    text = "--- a/f\n+++ b/f\n@@ -4,3 +4,3 @@\n l4\n-l5\n+L5\n l6\n@@ -8,3 +8,2 @@\n l8\n-l9\n l10\n"
    [file] = parse(text).files
    [hunk] = whole_file(file, after).hunks
    assert [(line.kind, line.old, line.new, line.text) for line in hunk.lines] == [
        (" ", 1, 1, "l1"),
        (" ", 2, 2, "l2"),
        (" ", 3, 3, "l3"),
        (" ", 4, 4, "l4"),
        ("-", 5, None, "l5"),
        ("+", None, 5, "L5"),
        (" ", 6, 6, "l6"),
        (" ", 7, 7, "l7"),
        (" ", 8, 8, "l8"),
        ("-", 9, None, "l9"),
        (" ", 10, 9, "l10"),
    ]
    assert hunk.lines[4].partner == 5


def test_whole_file_of_a_file_without_final_newline_and_a_change_at_its_start() -> None:
    [file] = parse("--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+new first\n").files
    [hunk] = whole_file(file, "new first\nsecond\r\nlast").hunks
    assert [(line.kind, line.new, line.text, line.cr, line.no_newline) for line in hunk.lines] == [
        ("+", 1, "new first", False, False),
        (" ", 2, "second", True, False),
        (" ", 3, "last", False, True),
    ]


# ---- file types ----------------------------------------------------------------------------------------


def test_language_by_name_then_by_shebang() -> None:
    assert language_for("hooks/notes.py") == "python"
    assert language_for("hooks/guard.sh") == "bash"
    assert language_for("prompts/chat.md") == "markdown"
    assert language_for("config/evolve.jsonc") == "json"
    assert language_for("notes/notes.json") == "json"
    assert language_for("hooks/guard", "#!/bin/sh") == "bash"
    assert language_for("hooks/notes", "#!/usr/bin/env python3") == "python"
    assert language_for("hooks/notes", "#!/usr/bin/env -S python3.11 -u") == "python"
    assert language_for("hooks/run", "#!/usr/local/bin/node") == "javascript"
    assert language_for("hooks/notes", None) is None
