"""A unified diff as data: its files, hunks and lines, each removed line paired with the added line
that replaced it; and one file of it whole, its hunks among the file's other lines.

Plain Python (no Textual, no Rich), so it is tested on plain strings; `diffview.py` draws it, and
`diffwords.py` finds the words that changed within a pair. It reads what `git show --patch` prints
(renames, mode changes, binary files, `\\ No newline at end of file`, CRLF lines) and the bare
`--- a/x` / `+++ b/x` diffs of pending changes. Work is bounded: at most `MAX_LINES` diff lines
are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LINES = 200_000  # diff lines kept; the rest are counted in Diff.omitted

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "a": "\a", "b": "\b", "f": "\f", "r": "\r", "v": "\v"}


@dataclass(slots=True)
class Line:
    """One line of a hunk."""

    kind: str  # " " context, "-" removed, "+" added
    text: str  # without its sign and line end
    old: int | None  # its number in the file before the change (context and removed lines)
    new: int | None  # and after it (context and added lines)
    cr: bool = False  # it ended with "\r\n"
    no_newline: bool = False  # the file ends here without a newline ("\ No newline at end of file")
    partner: int | None = None  # the index, in its hunk, of the line it pairs with (removed <-> added)


@dataclass(slots=True)
class Hunk:
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    section: str = ""  # what follows the second "@@" (the enclosing function, for instance)
    lines: list[Line] = field(default_factory=list)

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@{self.section}"

    def rows(self) -> list[tuple[int | None, int | None]]:
        """The hunk side by side: (left, right) line indices per row; a context line is on both
        sides, a removed line faces the added line it pairs with, None where a side has nothing."""
        out: list[tuple[int | None, int | None]] = []
        for i, line in enumerate(self.lines):
            if line.kind == " ":
                out.append((i, i))
            elif line.kind == "-":
                out.append((i, line.partner))
            elif line.partner is None:
                out.append((None, i))
        return out


@dataclass(slots=True)
class FileDiff:
    """One file of a diff."""

    old_path: str | None  # None: the change created the file
    new_path: str | None  # None: it deleted the file
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    similarity: int | None = None  # percent, for a rename or copy
    copied: bool = False
    notes: list[str] = field(default_factory=list)  # header lines this module does not read

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def status(self) -> str:
        """added, deleted, renamed, copied, or modified."""
        if self.old_path is None:
            return "added"
        if self.new_path is None:
            return "deleted"
        if self.old_path != self.new_path:
            return "copied" if self.copied else "renamed"
        return "modified"

    def counts(self) -> tuple[int, int]:
        """Lines added and removed."""
        added = removed = 0
        for hunk in self.hunks:
            for line in hunk.lines:
                if line.kind == "+":
                    added += 1
                elif line.kind == "-":
                    removed += 1
        return added, removed

    def first_line(self) -> str | None:
        """The file's first line, when the diff shows it (for a `#!` line): after the change, else before."""
        for side in ("new", "old"):
            for hunk in self.hunks:
                for line in hunk.lines:
                    if getattr(line, side) == 1:
                        return line.text
        return None


@dataclass(slots=True)
class Diff:
    files: list[FileDiff] = field(default_factory=list)
    omitted: int = 0  # diff lines beyond MAX_LINES, not read

    @property
    def empty(self) -> bool:
        return not self.files


# ---- parsing ---------------------------------------------------------------------------------------


def parse(text: str, max_lines: int = MAX_LINES) -> Diff:
    """The files, hunks and lines of a unified diff (the output of `git show --patch`, `git diff`
    or `difflib.unified_diff`). Anything it does not understand is kept as a note of its file, so
    nothing is silently dropped; a diff cut in the middle (a truncated patch) parses up to the cut."""
    raw = text.split("\n")
    if raw and raw[-1] == "":
        raw.pop()  # the final newline ends the last line; it does not start another
    diff = Diff()
    if len(raw) > max_lines:
        diff.omitted = len(raw) - max_lines
        raw = raw[:max_lines]
    file: FileDiff | None = None
    sides = False  # the file's "--- " and "+++ " lines were read
    hunk: Hunk | None = None
    old_no = new_no = 0
    old_left = new_left = 0  # lines the hunk header announced and that have not come yet
    i = 0
    while i < len(raw):
        row = raw[i]
        i += 1
        if hunk is not None and (old_left > 0 or new_left > 0):
            sign = row[:1]
            if sign in (" ", "-", "+") or row == "":
                body = row[1:]
                cr = body.endswith("\r")
                if cr:
                    body = body[:-1]
                if sign == "+":
                    hunk.lines.append(Line("+", body, None, new_no, cr))
                    new_no += 1
                    new_left -= 1
                elif sign == "-":
                    hunk.lines.append(Line("-", body, old_no, None, cr))
                    old_no += 1
                    old_left -= 1
                else:  # a context line ("" is an empty context line whose space was stripped)
                    hunk.lines.append(Line(" ", body, old_no, new_no, cr))
                    old_no += 1
                    new_no += 1
                    old_left -= 1
                    new_left -= 1
                continue
        if row.startswith("\\"):  # "\ No newline at end of file": about the line before it
            if hunk is not None and hunk.lines:
                hunk.lines[-1].no_newline = True
            continue
        match = _HUNK.match(row)
        if match and file is not None:
            old_start, old_count = int(match[1]), int(match[2] if match[2] is not None else 1)
            new_start, new_count = int(match[3]), int(match[4] if match[4] is not None else 1)
            hunk = Hunk(old_start, old_count, new_start, new_count, match[5])
            file.hunks.append(hunk)
            # An empty side's start is the line before it: the next line is one further.
            old_no = old_start if old_count else old_start + 1
            new_no = new_start if new_count else new_start + 1
            old_left, new_left = old_count, new_count
            continue
        if (
            row.startswith("diff --git ")
            or row.startswith("diff --cc ")
            or row.startswith("diff --combined ")
        ):
            file = FileDiff(*_git_header_paths(row))
            sides = False
            if not row.startswith("diff --git "):
                file.notes.append(row)
            diff.files.append(file)
            hunk = None
            continue
        if row.startswith("--- ") and i < len(raw) and raw[i].startswith("+++ "):
            old_path, new_path = _side_path(row[4:]), _side_path(raw[i][4:])
            i += 1
            if file is None or file.hunks or sides:
                file = FileDiff(old_path, new_path)  # a bare diff (no "diff --git" line), or the next file
                diff.files.append(file)
            else:
                file.old_path, file.new_path = old_path, new_path
            sides = True
            hunk = None
            continue
        if file is None:
            continue  # text before the first file (a commit message, say): not part of any file
        hunk = None
        _header_line(file, row)
    for f in diff.files:
        for h in f.hunks:
            pair_lines(h.lines)
    return diff


def _header_line(file: FileDiff, row: str) -> None:
    """An extended header line of git (mode, rename, copy, index, binary)."""
    for prefix, attr in (
        ("rename from ", "old_path"),
        ("rename to ", "new_path"),
        ("copy from ", "old_path"),
        ("copy to ", "new_path"),
    ):
        if row.startswith(prefix):
            setattr(file, attr, _unquote(row[len(prefix) :]))
            file.copied = prefix.startswith("copy")
            return
    if row.startswith("new file mode "):
        file.old_path, file.new_mode = None, row[len("new file mode ") :]
    elif row.startswith("deleted file mode "):
        file.new_path, file.old_mode = None, row[len("deleted file mode ") :]
    elif row.startswith("old mode "):
        file.old_mode = row[len("old mode ") :]
    elif row.startswith("new mode "):
        file.new_mode = row[len("new mode ") :]
    elif row.startswith(("similarity index ", "dissimilarity index ")):
        file.similarity = int(row.rsplit(" ", 1)[1].rstrip("%") or 0)
    elif row.startswith("Binary files ") or row == "GIT binary patch":
        file.binary = True
    elif not row.startswith("index "):
        file.notes.append(row)


def _git_header_paths(row: str) -> tuple[str | None, str | None]:
    """The two paths of `diff --git a/<old> b/<new>` (quoted when they hold special characters)."""
    rest = row.split(" ", 2)[2] if row.count(" ") >= 2 else ""
    if rest.startswith('"'):
        first, _, tail = _split_quoted(rest)
        return _strip_prefix(first), _strip_prefix(_unquote(tail.strip()))
    if rest.endswith('"'):
        start = rest.rfind(' "')
        return _strip_prefix(rest[:start]), _strip_prefix(_unquote(rest[start + 1 :]))
    # Unquoted: "a/<p> b/<p>", where either path may hold spaces. The same path on both sides
    # (every change but a rename, whose real paths come on the rename lines) splits in the middle.
    half = (len(rest) - 1) // 2
    if rest[half : half + 3] == " b/" and rest[2:half] == rest[half + 3 :]:
        return rest[2:half], rest[half + 3 :]
    old, sep, new = rest.partition(" b/")
    return _strip_prefix(old), (new if sep else None)


def _side_path(value: str) -> str | None:
    """The path of a `--- ` or `+++ ` line: None for /dev/null, without its a/ or b/ prefix."""
    value = value.split("\t", 1)[0] if not value.startswith('"') else value
    value = _unquote(value)
    if value == "/dev/null":
        return None
    return _strip_prefix(value)


def _strip_prefix(path: str | None) -> str | None:
    if path is None:
        return None
    return path[2:] if path[:2] in ("a/", "b/") else path


def _split_quoted(text: str) -> tuple[str, int, str]:
    """A quoted string at the start of `text` (unquoted), where it ends, and the rest."""
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return _unquote(text[: i + 1]), i + 1, text[i + 1 :]
        i += 1
    return _unquote(text), len(text), ""


def _unquote(value: str) -> str:
    """A path as git quotes it ("a/t\\303\\244b"), back to the path; unquoted paths as they are."""
    if len(value) < 2 or not (value.startswith('"') and value.endswith('"')):
        return value
    out = bytearray()
    body = value[1:-1]
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "0123" and body[i + 1 : i + 4].isdigit():
                out.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            out += _ESCAPES.get(nxt, nxt).encode()
            i += 2
            continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", errors="replace")


# ---- pairs -----------------------------------------------------------------------------------------


def pair_lines(lines: list[Line]) -> None:
    """Pair each run of removed lines with the run of added lines right after it, in order: the
    first removed with the first added, and so on (the rest of the longer run has no partner)."""
    i, n = 0, len(lines)
    while i < n:
        if lines[i].kind != "-":
            i += 1
            continue
        start = i
        while i < n and lines[i].kind == "-":
            i += 1
        added = i
        while i < n and lines[i].kind == "+":
            i += 1
        for k in range(min(added - start, i - added)):
            lines[start + k].partner, lines[added + k].partner = added + k, start + k


# ---- the whole file ---------------------------------------------------------------------------------


def whole_file(file: FileDiff, content: str) -> FileDiff:
    """`file` as one hunk over the whole of `content` (the file after the change): its hunks where
    they are, every other line of the file around them as context. Lines the diff does not reach
    (a truncated patch, a file that moved on) are context; hunks past the end of `content` are kept."""
    after = content.split("\n")
    ends_with_newline = content.endswith("\n")
    if ends_with_newline or content == "":
        after.pop()
    lines: list[Line] = []
    old_no = new_no = 1

    def context_until(limit: int) -> None:
        nonlocal old_no, new_no
        while new_no < limit and new_no <= len(after):
            text = after[new_no - 1]
            cr = text.endswith("\r")
            last = new_no == len(after) and not ends_with_newline
            lines.append(Line(" ", text[:-1] if cr else text, old_no, new_no, cr, no_newline=last))
            old_no += 1
            new_no += 1

    for hunk in file.hunks:
        context_until(hunk.new_start if hunk.new_count else hunk.new_start + 1)
        old_no = hunk.old_start if hunk.old_count else hunk.old_start + 1
        for line in hunk.lines:
            lines.append(Line(line.kind, line.text, line.old, line.new, line.cr, line.no_newline))
            if line.kind != "+":
                old_no += 1
            if line.kind != "-":
                new_no += 1
    context_until(len(after) + 1)
    pair_lines(lines)
    whole = Hunk(1, old_no - 1, 1, new_no - 1, "", lines)
    return FileDiff(
        file.old_path,
        file.new_path,
        [whole],
        file.binary,
        file.old_mode,
        file.new_mode,
        file.similarity,
        file.copied,
        list(file.notes),
    )
