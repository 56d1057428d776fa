"""View 2, stage results: each stage dispatch, which hooks ran, the merged output, recover."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal

from engine.protocol import StageResult

from ..detail import DetailPane, Part
from ..format import as_json, clock_time, date_time, duration
from ..line import Line
from ..model import ConsoleModel, Update
from ..model import Part as ModelPart
from ..table import KeyedTable
from .base import FOLLOW, MORE, OPEN, TableView


class StagesView(TableView):
    """Each stage dispatch: which hooks ran, the merged output, whether recover stepped in."""

    NAME = "stages"
    LABEL = "Stage results"
    PARTS = frozenset({ModelPart.STAGES})
    BINDINGS: ClassVar[list[BindingType]] = [OPEN, FOLLOW, MORE]
    EMPTY = (
        "Stage results appear here as the engine dispatches a stage to the hooks: each request, message "
        "and tool call of a session of a connected opencode, each heartbeat tick, or a stage you run by "
        "hand (s)."
    )

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("time", "time"),
                    ("stage", "stage"),
                    ("session", "session"),
                    ("hooks", "hooks"),
                    ("failed", "failed"),
                    ("recover", "recover"),
                    ("duration", "duration"),
                ],
                id="stages-table",
                tells_following=True,
            )
            yield DetailPane("select a stage result", id="stage-detail", classes="detail")
        yield Line(id="stages-status", classes="status-line")

    @staticmethod
    def row(d: StageResult, name: Callable[[str | None], str]) -> tuple[str, list[Any]]:
        failed = d.failed or []
        return str(d.id), [
            clock_time(d.started_at),
            d.stage or "",
            name(d.session),
            str(len(d.hooks or [])),
            Text(", ".join(failed), style="red") if failed else "",
            Text("recovered", style="yellow") if d.recovered else "",
            duration(d.duration_ms),
        ]

    def show_dispatch(self, d: StageResult, name: Callable[[str | None], str]) -> None:
        head = Text()
        head.append(f"{d.stage}", style="bold")
        session = f"{name(d.session)} ({d.session})" if d.session else "-"
        head.append(f" · session {session} · {duration(d.duration_ms)} · {date_time(d.started_at)}\n")
        head.append("hooks: " + (", ".join(d.hooks or []) or "none"))
        if d.failed:
            head.append("\nfailed: " + ", ".join(d.failed), style="red")
        if d.recovered:
            head.append("\nrecover stepped in: its output is merged below", style="yellow")
        self.query_one(DetailPane).show(
            head,
            [
                Part("merged", "merged output", as_json(d.merged)),
                Part("context", "input context", as_json(d.context)),
            ],
        )

    def draw(self, part: ModelPart) -> None:
        name = self.agent.name_session
        self.table.replace_all([self.row(d, name) for d in self.model.dispatches.values()])

    def apply(self, update: Update) -> None:
        if update.stages:
            name = self.agent.name_session
            self.table.upsert([self.row(d, name) for d in update.stages])

    def highlighted(self, key: str) -> None:
        found = self.model.dispatches.get(key)
        if found is not None:
            self.show_dispatch(found, self.agent.name_session)

    @classmethod
    def session_of(cls, model: ConsoleModel, key: str | None) -> str | None:
        found = model.dispatches.get(key) if key else None
        return found.session if found else None
