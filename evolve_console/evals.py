"""A change's behaviour checks: the workspace's scenarios run through opencode at the version before
the change and after it, in the engine (docs/evals.md). Their progress and cancel on a screen of
their own, and the result as the operator reads it: the summary line, per scenario how often it
passed before and after and which expectation failed, and the two answers with the changed words
marked (drawn from the engine's segments as a replay's are, `replay.render_diff`).

The screen learns of progress from the app, which follows the event stream (`EvalScreen.follow`),
and fetches the whole result when the checks end; the changes view shows the latest result in the
selected change's detail (`eval_text`).
"""

from __future__ import annotations

import time
from typing import ClassVar, TypeGuard

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType

from engine.protocol import calls
from engine.protocol.calls import Call
from engine.protocol.records import EvalCancelled, EvalProgress, EvalRun, ScenarioComparison
from engine.protocol.text import short_target

from .client import EngineClient, EngineError
from .format import clean
from .help import HELP_KEY
from .jobscreen import JobScreen, job_css
from .model import ChangeEntry
from .replay import render_diff

EVAL_KEY = "b"  # the changes view's key that runs them
STATUS_STYLES = {
    "regressed": "bold red",
    "improved": "bold green",
    "passing": "green",
    "failing": "yellow",
    "refused": "dim",
    "differs": "bold magenta",
    "same": "dim",
}
STATUS_WORDS = {"regressed": "REGRESSED", "passing": "passes", "failing": "fails in both"}
ANSWER_LIMIT = 2000  # characters of an answer shown in the detail


def start_eval(change: ChangeEntry) -> Call[EvalRun]:
    """The call that runs a change's checks: a commit's and a held change's are different routes."""
    if change.pending_id:
        return calls.evaluate_pending(change.pending_id)
    return calls.evaluate(change.key)


async def latest_eval(client: EngineClient, change: ChangeEntry) -> EvalRun | None:
    """The change's checks under way, else its latest ones; None when it has none (or is an attempt,
    which has no version to check)."""
    if change.attempt_id is not None:
        return None
    latest = (
        calls.latest_eval_pending(change.pending_id) if change.pending_id else calls.latest_eval(change.key)
    )
    try:
        return await client.send(latest)
    except EngineError:
        return None


# ---- drawing a result ------------------------------------------------------------------------------


def eval_line(result: EvalRun | None) -> Text:
    """The latest checks in a line, for the changes view's detail pane."""
    text = Text()
    if result is None:
        text.append(
            f"behaviour checks: none yet ({EVAL_KEY} runs the scenarios before and after it)", style="dim"
        )
        return text
    if result.state == "running":
        text.append(
            f"behaviour checks: running, {result.done} of {result.total} ({EVAL_KEY} shows them)",
            style="yellow",
        )
        return text
    when = time.strftime("%H:%M:%S", time.gmtime(result.finished_at or result.started_at))
    text.append(f"behaviour checks of {when} UTC: ", style="bold")
    if result.state != "done":
        text.append(result.state + (f": {result.error}" if result.error else ""), style="red")
        return text
    text.append(result.summary or "done", style="bold red" if result.regression else "green")
    return text


def eval_text(result: EvalRun | None) -> Text:
    """The latest checks for the detail pane: their line, then per scenario how often it passed before
    and after, which expectation failed, and the two answers with the changed words marked."""
    text = eval_line(result)
    if result is None or result.state != "done":
        return text
    for scenario in result.scenarios:
        text.append("\n")
        text.append_text(_scenario_line(scenario))
    for scenario in result.scenarios:
        if scenario.status in ("regressed", "improved", "failing", "differs"):
            text.append("\n")
            text.append_text(scenario_details(scenario))
    return text


def _scenario_line(scenario: ScenarioComparison) -> Text:
    line = Text("  ")
    line.append(f"{scenario.name}: ")
    line.append(
        f"before {scenario.passed_before}/{scenario.repeat}, after {scenario.passed_after}/{scenario.repeat}"
    )
    line.append(" ")
    word = STATUS_WORDS.get(scenario.status, scenario.status)
    line.append(word, style=STATUS_STYLES.get(scenario.status, ""))
    if scenario.note:
        line.append(f" ({scenario.note})", style="dim")
    return line


def scenario_details(scenario: ScenarioComparison) -> Text:
    """One scenario whole: the expectations that failed at each version, the answers (the one after
    with its changes marked) and the tools each version called."""
    text = Text()
    text.append(f"{scenario.name}: ", style="bold")
    text.append(
        STATUS_WORDS.get(scenario.status, scenario.status), style=STATUS_STYLES.get(scenario.status, "")
    )
    for label, failed in (("failed before", scenario.failed_before), ("failed after", scenario.failed_after)):
        for line in failed:
            text.append(f"\n  {label}: ", style="bold")
            text.append(clean(line), style="red")
    text.append("\n  answer before: ", style="bold")
    text.append(clean(scenario.answer_before[:ANSWER_LIMIT]) or "(none)")
    text.append("\n  answer after:  ", style="bold")
    if scenario.answer_diff:
        text.append_text(render_diff(scenario.answer_diff))
    else:
        text.append(clean(scenario.answer_after[:ANSWER_LIMIT]) or "(none)")
    if scenario.tools_before or scenario.tools_after:
        text.append("\n  tools before: ", style="bold")
        text.append(clean("; ".join(scenario.tools_before)) or "(none)")
        text.append("\n  tools after:  ", style="bold")
        text.append(clean("; ".join(scenario.tools_after)) or "(none)")
    return text


def report(result: EvalRun) -> RenderableType:
    """The whole result: what was compared, the figures per scenario, each that differs in full."""
    head = Text()
    head.append(f"{result.kind} {short_target(result.target)} “{result.title}”", style="bold")
    head.append(f"  ({', '.join(result.files)})\n")
    head.append(f"before: {result.before}\nafter:  {result.after}\n", style="dim")
    if result.model:
        runs = "run" if result.repeat == 1 else "runs"
        head.append(f"model:  {result.model}, {result.repeat} {runs} per scenario per version\n", style="dim")
    for warning in result.warnings:
        head.append(f"note: {warning}\n", style="yellow")
    if result.summary:
        head.append(result.summary, style="bold red" if result.regression else "bold green")
        head.append("\n")
    parts: list[RenderableType] = [head]
    if result.scenarios:
        parts.append(figures(result.scenarios))
    for scenario in result.scenarios:
        if scenario.status != "passing":
            parts.append(Text("\n").append_text(scenario_details(scenario)))
    return Group(*parts)


def figures(scenarios: list[ScenarioComparison]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column, justify in (("scenario", "left"), ("before", "right"), ("after", "right"), ("", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for s in scenarios:
        word = STATUS_WORDS.get(s.status, s.status)
        table.add_row(
            s.name,
            f"{s.passed_before}/{s.repeat}",
            f"{s.passed_after}/{s.repeat}",
            Text(word, style=STATUS_STYLES.get(s.status, "")),
        )
    return table


# ---- the screen --------------------------------------------------------------------------------------


class EvalScreen(JobScreen[EvalProgress, EvalRun]):
    """Runs a change's behaviour checks in the engine, with their progress, then shows the result.
    Escape closes it (checks under way go on in the engine, and their result is kept); `c` cancels
    them (the engine stops every process they started)."""

    DEFAULT_CSS = job_css("EvalScreen", "eval", status_height="auto")
    TITLE = "behaviour checks of a change"
    HELP_NOTE = (
        "The checks run each scenario through opencode with the agent's own model, at the version "
        "before the change and after it (real model traffic)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="eval.close", tooltip="Close (checks under way go on)"),
        Binding("c", "cancel", "Cancel checks", id="eval.cancel", tooltip="Stop the checks under way"),
        Binding("q", "app.quit", "Quit", show=False, tooltip="Close the console (the engine keeps running)"),
        HELP_KEY,
    ]
    PREFIX = "eval"
    HEADING = "Behaviour checks"
    CANCEL_LABEL = "Cancel checks (c)"
    RUNNING = "running the scenarios"
    UNIT = " runs"
    CANCELLING = "cancelling: stopping the processes the checks started…"
    WORKERS = ("start the behaviour checks", "load the behaviour checks", "cancel the behaviour checks")

    @property
    def eval_id(self) -> str | None:
        return self.job_id

    def start_call(self) -> Call[EvalRun]:
        return start_eval(self.change)

    def status_call(self, job_id: str) -> Call[EvalRun]:
        return calls.eval_status(job_id)

    def cancel_call(self, job_id: str) -> Call[EvalCancelled]:
        return calls.eval_cancel(job_id)

    def is_progress(self, record: EvalProgress | EvalRun) -> TypeGuard[EvalProgress]:
        return isinstance(record, EvalProgress)

    def report(self, result: EvalRun) -> RenderableType:
        return report(result)
