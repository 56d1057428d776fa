"""A job of the engine about one change (a replay, behaviour checks) on a screen of its own: started
when the screen opens, its progress from the event stream, its result fetched when it ends, and
cancelled by a key.

The engine runs every such job the same way (its `core/jobs.py`), so one screen follows them all:
a kind of job says only its calls, its words and how its result reads (`JobScreen`'s abstract
methods and class attributes). The app passes each of the job's events on (`JobScreen.follow`).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Coroutine
from typing import Any, ClassVar, Generic, Protocol, TypeGuard, TypeVar

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, ProgressBar, Static
from textual.worker import Worker

from engine.protocol.calls import Call
from engine.protocol.routes import Decodes

from .client import EngineClient, EngineError
from .messages import pass_failure_up
from .model import ChangeEntry


class JobProgress(Protocol):
    """A job's progress event (ReplayProgress, EvalProgress)."""

    id: str
    target: str
    done: int
    total: int
    message: str


class JobResult(Decodes, Protocol):
    """A job's record, running or ended (ReplayResult, EvalRun), as the engine answers it."""

    id: str
    target: str
    state: str  # running | done | cancelled | failed
    error: str | None
    duration_ms: float
    done: int
    total: int


P = TypeVar("P", bound=JobProgress)
R = TypeVar("R", bound=JobResult)


def job_css(screen: str, prefix: str, status_height: str) -> str:
    """A job screen's styles, with its own names, so that each screen can move or be replaced as one
    piece."""
    return f"""
    {screen} {{ align: center middle; }}
    {screen} #{prefix}-dialog {{
        width: 95%; height: 95%; padding: 0 1; background: $surface; border: thick $primary;
    }}
    {screen} #{prefix}-progress {{ height: 1; margin: 1 0 0 0; }}
    {screen} #{prefix}-status {{ height: {status_height}; color: $text-muted; }}
    {screen} #{prefix}-body {{ height: 1fr; margin-top: 1; }}
    {screen} #{prefix}-buttons {{ height: 3; }}
    {screen} #{prefix}-buttons Button {{ margin-right: 2; }}
    """


class JobScreen(ModalScreen[None], Generic[P, R]):
    """Starts a job about a change in the engine, shows its progress, then its result. Escape closes
    it (a job under way goes on in the engine, and its result is kept); `c` cancels it."""

    PREFIX: ClassVar[str]  # the ids of its parts ("{PREFIX}-status", …) and its workers' groups
    HEADING: ClassVar[str]  # the title's first words, before the change's subject
    CANCEL_LABEL: ClassVar[str]  # the cancel button
    RUNNING: ClassVar[str]  # the status while it runs and no progress has said more
    UNIT: ClassVar[str] = ""  # after "done of total" in the status
    CANCELLING: ClassVar[str]  # the status once the engine took the cancel
    WORKERS: ClassVar[tuple[str, str, str]]  # the names of the start, fetch and cancel workers

    def __init__(self, client: Callable[[], EngineClient], change: ChangeEntry) -> None:
        super().__init__()
        self._client = client
        self.change = change
        self.target = change.pending_id or change.key
        self.job_id: str | None = None
        self.result: R | None = None

    # ---- what a kind of job says -------------------------------------------------------------------

    @abstractmethod
    def start_call(self) -> Call[R]:
        """The call that starts the job about `self.change`."""

    @abstractmethod
    def status_call(self, job_id: str) -> Call[R]:
        """The call that answers the job's record."""

    @abstractmethod
    def cancel_call(self, job_id: str) -> Call[Any]:
        """The call that cancels it."""

    @abstractmethod
    def is_progress(self, record: P | R) -> TypeGuard[P]:
        """Whether an event of the job is its progress (else its end)."""

    @abstractmethod
    def report(self, result: R) -> RenderableType:
        """The ended job's result as the operator reads it."""

    def ended(self, result: R) -> str:
        """The status line once the job has ended."""
        return f"{result.state} in {result.duration_ms / 1000:.1f} s" + (
            f": {result.error}" if result.error else ""
        )

    # ---- the screen ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        prefix = self.PREFIX
        with Vertical(id=f"{prefix}-dialog"):
            yield Label(Text(f"{self.HEADING}: {self.change.subject}", style="bold"), id=f"{prefix}-title")
            yield ProgressBar(total=None, show_eta=False, id=f"{prefix}-progress")
            yield Static("starting…", id=f"{prefix}-status", markup=False)
            with VerticalScroll(id=f"{prefix}-body"):
                yield Static("", id=f"{prefix}-report", markup=False)
            with Horizontal(id=f"{prefix}-buttons"):
                yield Button(self.CANCEL_LABEL, variant="warning", id=f"{prefix}-cancel")
                yield Button("Close (escape)", id=f"{prefix}-close")

    def on_mount(self) -> None:
        self.start()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        pass_failure_up(self, event)

    @property
    def running(self) -> bool:
        return self.result is None or self.result.state == "running"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel":
            return True if self.running else None
        return True

    def _worker(self, work: Coroutine[Any, Any, None], index: int, exclusive: bool = True) -> None:
        group = ("start", "fetch", "cancel")[index]
        self.run_worker(
            work,
            name=self.WORKERS[index],
            group=f"{self.PREFIX}-{group}",
            exclusive=exclusive,
            exit_on_error=False,
        )

    def start(self) -> None:
        self._worker(self._start(), 0)

    async def _start(self) -> None:
        started = await self._client().send(self.start_call())
        self.job_id = started.id
        # It may have ended before its id came back: ask once, events do the rest.
        self.show(await self._client().send(self.status_call(started.id)))

    def follow(self, record: P | R) -> None:
        """An event of a job of this kind from the engine's stream (the app passes each one on)."""
        if record.target != self.target or (self.job_id is not None and record.id != self.job_id):
            return
        if self.is_progress(record):
            if self.running:
                self._progress(record.done, record.total, record.message)
        elif self.job_id is not None:
            self.fetch(record.id)

    def fetch(self, job_id: str) -> None:
        self._worker(self._fetch(job_id), 1)

    async def _fetch(self, job_id: str) -> None:
        self.show(await self._client().send(self.status_call(job_id)))

    def show(self, result: R) -> None:
        if self.result is not None and self.result.state != "running" and result.state == "running":
            return  # an answer older than the end already shown
        self.result = result
        if result.state == "running":
            self._progress(result.done, result.total, self.RUNNING)
            return
        bar = self.query_one(f"#{self.PREFIX}-progress", ProgressBar)
        total = max(result.total, 1)
        bar.update(total=total, progress=total if result.state == "done" else result.done)
        self.query_one(f"#{self.PREFIX}-status", Static).update(self.ended(result))
        self.query_one(f"#{self.PREFIX}-report", Static).update(self.report(result))
        self.query_one(f"#{self.PREFIX}-cancel", Button).disabled = True
        self.refresh_bindings()

    def _progress(self, done: int, total: int, message: str) -> None:
        bar = self.query_one(f"#{self.PREFIX}-progress", ProgressBar)
        if total:
            bar.update(total=total, progress=done)
        said = f"{message}: {done} of {total}{self.UNIT}" if total else message
        self.query_one(f"#{self.PREFIX}-status", Static).update(said)

    def action_cancel(self) -> None:
        if self.running and self.job_id is not None:
            self.cancel_job(self.job_id)

    def cancel_job(self, job_id: str) -> None:
        self._worker(self._cancel(job_id), 2, exclusive=False)

    async def _cancel(self, job_id: str) -> None:
        try:
            await self._client().send(self.cancel_call(job_id))
        except EngineError as exc:  # it ended meanwhile
            self.notify(str(exc), timeout=5)
            return
        self.query_one(f"#{self.PREFIX}-status", Static).update(self.CANCELLING)

    def action_close(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == f"{self.PREFIX}-cancel":
            self.action_cancel()
        elif event.button.id == f"{self.PREFIX}-close":
            self.action_close()
