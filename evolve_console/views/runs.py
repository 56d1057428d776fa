"""View 1, hook runs: every execution of a hook script, with filters, and the selected run in detail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Switch

from engine.protocol import HookRun

from ..detail import DetailPane, Part
from ..format import as_json, clock_time, date_time, duration
from ..line import Line
from ..model import RunFilter
from ..table import KeyedTable


def status_text(run: HookRun) -> Text:
    if run.error:
        return Text("failed", style="bold red")
    return Text("ok", style="green")


class RunsView(Vertical):
    """Live hook runs with filters, and the selected run in detail."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="run-filters", classes="filters"):
            yield Input(placeholder="stage", id="filter-stage")
            yield Input(placeholder="hook", id="filter-hook")
            yield Input(placeholder="session", id="filter-session")
            yield Label("failures only", classes="switch-label")
            yield Switch(id="filter-failed")
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("time", "time"),
                    ("stage", "stage"),
                    ("hook", "hook"),
                    ("session", "session"),
                    ("duration", "duration"),
                    ("status", "status"),
                ],
                id="runs-table",
            )
            yield DetailPane("select a run", id="run-detail", classes="detail")
        yield Line(id="runs-status", classes="status-line")

    def run_filter(self) -> RunFilter:
        """The filters as the fields and the switch show them now."""
        fields = {
            name: self.query_one(f"#filter-{name}", Input).value.strip() or None
            for name in ("stage", "hook", "session")
        }
        return RunFilter(**fields, failed=self.query_one("#filter-failed", Switch).value)

    @staticmethod
    def row(run: HookRun, name: Callable[[str | None], str]) -> tuple[str, list[Any]]:
        return str(run.id), [
            clock_time(run.started_at),
            run.stage or "",
            run.hook or "",
            name(run.session),
            duration(run.duration_ms),
            status_text(run),
        ]

    def show_run(self, run: HookRun, name: Callable[[str | None], str]) -> None:
        head = Text()
        head.append(f"{run.stage}  hooks/{run.hook}", style="bold")
        session = f"{name(run.session)} ({run.session})" if run.session else "-"
        head.append(f"\nsession {session} · started {date_time(run.started_at)}")
        head.append(f" · {duration(run.duration_ms)}")
        if run.exit_code is not None:
            head.append(f" · exit {run.exit_code}")
        if run.signal:
            head.append(f" · killed by {run.signal}", style="red")
        stderr = run.stderr or ""
        if run.stderr_truncated:
            stderr += "\n[stderr was cut by the engine at 256 KiB]"
        lines = run.stdout_lines or []
        self.query_one(DetailPane).show(
            head,
            [
                Part("error", "error", run.error or "", empty="(no error)"),
                Part("stderr", "stderr", stderr),
                Part("result", "parsed result", "" if run.result is None else as_json(run.result)),
                Part(
                    "stdout", "stdout lines", "\n".join(f"{i + 1:>4}  {line}" for i, line in enumerate(lines))
                ),
                Part("logs", "log lines", "\n".join(str(x) for x in run.logs or [])),
                Part("input", "input (JSON on stdin)", as_json(run.input)),
            ],
        )
