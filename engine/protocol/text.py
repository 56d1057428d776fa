"""A replay's findings in words, as both `evolve replay` (engine.replay.text) and the console's replay
screen say them: long unchanged stretches cut, a field that comes or goes, a change's target, the
failures that share their errors. Standard library only, as the rest of the contract."""

from __future__ import annotations

from engine.protocol.records import FieldDiff, InputComparison

KEPT_AROUND_A_CUT = 20
"""A stretch is cut only when that saves more than these characters: a cut that hides a few words
says less than the words."""


def shorten(text: str, context: int, *, first: bool = False, last: bool = False) -> str:
    """An unchanged stretch of a compared field cut to `context` characters next to each change
    around it: none before it when it is the field's first stretch, none after it when its last."""
    head = 0 if first else context
    tail = 0 if last else context
    if len(text) <= head + tail + KEPT_AROUND_A_CUT:
        return text
    skipped = len(text) - head - tail
    return f"{text[:head]}[… {skipped:,} unchanged characters …]{text[len(text) - tail :]}"


def absence(diff: FieldDiff) -> str:
    """What a difference's label is followed by when one version gave no such field at all."""
    if diff.before_absent:
        return " (new: the version before gave none)"
    if diff.after_absent:
        return " (gone: the version after gives none)"
    return ""


def short_target(target: str) -> str:
    """A replayed change as a heading names it: a commit's sha cut to ten characters, a held change's
    id as it is."""
    return target[:10] if len(target) == 40 else target


def failure_lines(found: InputComparison) -> list[str]:
    """The errors of a failed input, each with the version it came from, one line an item (an error
    of several lines gives several)."""
    errors = [*(f"before: {e}" for e in found.errors_before), *(f"after: {e}" for e in found.errors_after)]
    return "\n".join(errors).split("\n")


def grouped_by_failures(
    found: list[InputComparison],
) -> list[tuple[list[str], list[InputComparison]]]:
    """Failed inputs with the very same errors together (one broken hook fails every input alike), in
    the order each group first appears: the error lines and the inputs."""
    groups: dict[tuple[str, ...], list[InputComparison]] = {}
    for item in found:
        groups.setdefault(tuple(failure_lines(item)), []).append(item)
    return [(list(lines), items) for lines, items in groups.items()]
