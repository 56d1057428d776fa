"""View 4, heartbeat: its state and countdown, the cleanup gauges, the last tick (a degraded one with
the hook that failed, its error and the change most likely behind it), the last ticks, fire and
pause."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.widgets import Button, Label, ProgressBar, Static

from engine.protocol import HeartbeatStatus, TickResult

from .. import controls
from ..alerts import REVERT_KEY, SHOW_KEY, Named
from ..format import as_json, clock_time, countdown, date_time, duration, session_label, short
from ..messages import COMMAND_GROUP, Reload, Toast
from ..model import Part
from ..nextstep import connect_steps
from ..screens import MoreScreen
from ..section import Section
from .base import MORE, View

OUTCOME_STYLES = {"ok": "green", "degraded": "bold yellow", "skipped": "dim", "failed": "bold red"}
HISTORY_SHOWN = 10  # ticks listed in the view (m shows the last tick in full)


def tick_lines(tick: TickResult) -> list[str]:
    """A tick in full, as the view shows the last one: its outcome and why, the hooks that failed
    (their error and the change most likely behind each), the cleanup, the message it sent."""
    lines = [f"{tick.trigger} tick at {date_time(tick.started_at)}: {tick.outcome}"]
    if tick.reason:
        lines.append(f"reason: {tick.reason}")
    for failure in tick.failures:
        lines.append(f"failed: hooks/{failure.hook} at {failure.stage}: {failure.error}")
        lines.append(f"  the change behind it: {failure.cause or 'no change explains it'}")
        if failure.suspect is not None:
            keys = f"  {SHOW_KEY}: show it in view 5"
            if failure.suspect.origin != "initial":
                keys += f" · {REVERT_KEY}: revert it"
            lines.append(keys)
    if tick.prompt and tick.outcome == "degraded":
        lines.append(f"the message came from: {tick.prompt}")
    if tick.cleanup:
        lines.append(f"cleanup: {as_json(tick.cleanup)}")
    if tick.user:
        lines.append(f"sent: [heartbeat] {short(tick.user, 400)}")
    lines.append(f"took {duration(tick.duration_ms)}")
    return lines


def history_text(ticks: list[TickResult]) -> Text:
    """The last ticks, newest first, one line each."""
    text = Text()
    for tick in ticks[:HISTORY_SHOWN]:
        if text:
            text.append("\n")
        text.append(f"{clock_time(tick.started_at)} {tick.trigger:<6} ")
        text.append(tick.outcome, style=OUTCOME_STYLES.get(tick.outcome, ""))
        if tick.reason:
            text.append(f": {short(tick.reason, 160)}", style="dim")
    return text


class HeartbeatView(View, can_focus=True):
    """Interval, countdown, state, the cleanup gauges, and the actions. It takes the focus itself
    when shown (it has no table), so that its keys apply."""

    NAME = "heartbeat"
    LABEL = "Heartbeat"
    PARTS = frozenset({Part.HEARTBEAT, Part.TICKS})
    BINDINGS: ClassVar[list[BindingType]] = [MORE]

    def compose(self) -> ComposeResult:
        with Horizontal(id="heartbeat-actions"):
            yield Button("Fire now (f)", id="hb-fire", variant="primary")
            yield Button("Pause (p)", id="hb-pause")
            yield Button("Resume (p)", id="hb-resume")
        yield Static("", id="hb-summary", markup=False)
        yield Label("heartbeats since cleanup", classes="gauge-label", id="hb-count-label")
        yield ProgressBar(id="hb-count", show_eta=False)
        yield Label("tokens in the heartbeat session", classes="gauge-label", id="hb-tokens-label")
        yield ProgressBar(id="hb-tokens", show_eta=False)
        yield Section("last tick", id="hb-last")
        yield Label("last ticks, newest first", classes="gauge-label")
        yield Static("", id="hb-history", markup=False)

    def show_status(
        self,
        st: HeartbeatStatus,
        now: float,
        as_of: float | None = None,
        name: Callable[[str | None], str] | None = None,
    ) -> None:
        """`as_of`: when the engine last answered, while it does not (the status is then as it was
        known, and nothing counts down)."""
        paused, running = st.paused, st.running
        if as_of is not None:
            state, timer = "UNKNOWN", f"the engine does not answer: last known as of {clock_time(as_of)} UTC"
        elif running:
            state, timer = "RUNNING", "a tick is running"
        elif not st.enabled:
            state, timer = "OFF", "timer off (heartbeat_ms < 0): fire by hand"
        elif paused:
            state, timer = "PAUSED", "no timer ticks until resumed (p)"
        elif not st.connected:
            state = "WAITING"
            timer = (
                "no opencode connected: the first tick comes "
                f"{countdown((st.interval_ms or 0) / 1000)} after one connects (how: below)"
            )
        elif st.next_at:
            since = st.connected_at or 0.0
            first = "first tick" if st.last is None or st.last.started_at < since else "next tick"
            state = "IDLE"
            timer = f"opencode connected · {first} in {countdown(st.next_at - now)} (at {clock_time(st.next_at)} UTC)"
        else:
            state, timer = "IDLE", "no tick scheduled"
        model = st.model or {}
        if not st.session:
            session = "(none yet)"
        elif name is not None and name(st.session) != session_label(st.session, None):
            session = f"{name(st.session)} ({st.session})"  # titled
        else:
            session = st.session
        text = Text()
        text.append(state, style="bold green" if running else ("dim" if as_of is not None else "bold"))
        text.append(f" · {timer}\n")
        text.append(f"interval {countdown((st.interval_ms or 0) / 1000)} · cleanup {st.cleanup}")
        text.append(
            f" · model {model.get('providerID')}/{model.get('modelID')}" if model else " · model: none yet"
        )
        text.append(f"\nsession {session} · last heartbeat {date_time(st.time) if st.time else 'never'}")
        if st.degraded:
            text.append("\ndegraded: ", style="bold yellow")
            text.append(st.degraded)
        workspace = self.model.status.workspace if self.model.status else self.agent.workspace
        if state == "WAITING" and workspace:
            text.append("\n\n")
            text.append_text(connect_steps(workspace, self.agent.evolve))
        self.query_one("#hb-summary", Static).update(text)
        self._gauge("count", st.count, st.count_threshold, "heartbeats since cleanup")
        self._gauge("tokens", st.tokens, st.tokens_threshold, "tokens in the heartbeat session")
        last = st.last
        if last:
            self.query_one("#hb-last", Section).show("\n".join(tick_lines(last)))
        else:
            self.query_one("#hb-last", Section).show("", empty="(no tick yet)")
        self.query_one("#hb-pause", Button).display = not paused
        self.query_one("#hb-resume", Button).display = bool(paused)
        for button in self.query("#heartbeat-actions Button").results(Button):
            button.disabled = as_of is not None  # they need the engine, as f and p do

    def _gauge(self, name: str, value: int | None, threshold: int | None, label: str) -> None:
        bar = self.query_one(f"#hb-{name}", ProgressBar)
        shown = "?" if value is None else f"{value:,}"
        if threshold:
            bar.update(total=threshold, progress=min(value or 0, threshold))
            bar.display = True
            text = f"{label}: {shown} of {threshold:,} (cleanup at the threshold)"
        else:
            bar.display = False  # no gauge without a threshold (and no animation)
            text = f"{label}: {shown} (no threshold set)"
        self.query_one(f"#hb-{name}-label", Label).update(text)

    # ---- drawing -----------------------------------------------------------------------------

    def draw(self, part: Part) -> None:
        ticks = self.model.ticks  # the history, with the status: a tick's event brings both
        shown = history_text(ticks) if ticks else Text("(no tick yet)", style="dim")
        self.query_one("#hb-history", Static).update(shown)
        heartbeat = self.model.heartbeat
        if heartbeat is not None:
            # While the engine does not answer, the status is as it was last known.
            as_of = None if self.model.connected else self.agent.heard_at
            self.show_status(heartbeat, self.agent.clock(), as_of, self.agent.name_session)

    def named_change(self) -> Named | None:
        """A degraded last tick names the change most likely behind the hook that failed."""
        heartbeat = self.model.heartbeat
        last = heartbeat.last if heartbeat is not None else None
        suspect = controls.tick_suspect(last) if last is not None and last.outcome == "degraded" else None
        if suspect is None:
            return None
        return Named(suspect.sha, suspect.sha if suspect.origin != "initial" else None)

    def tick(self) -> None:
        if self.display:
            self.draw(Part.HEARTBEAT)  # the countdown

    def shown(self) -> None:
        self.draw(Part.HEARTBEAT)

    def action_more(self) -> None:
        self.app.push_screen(MoreScreen("last tick", self.query_one("#hb-last", Section).full_text))

    # ---- fire, pause and resume (its buttons, and f and p from every view) ----------------------

    @on(Button.Pressed, "#hb-fire")
    def fire_now(self) -> None:
        """One tick now, waited for; what it did is told."""
        self.notify("heartbeat: firing now…", timeout=3)
        self.fire_heartbeat()

    @on(Button.Pressed, "#hb-pause")
    @on(Button.Pressed, "#hb-resume")
    def pause_or_resume(self) -> None:
        self.toggle_pause()

    @work(group=COMMAND_GROUP, exit_on_error=False, name="fire the heartbeat")
    async def fire_heartbeat(self) -> None:
        tick = await controls.fire(self.agent.client)
        said, severity = controls.tick_said(tick)
        suspect = controls.tick_suspect(tick)
        toast = Toast(
            said,
            "information" if severity == "information" else "warning",
            12.0 if suspect is not None else 8.0,
            change=suspect.sha if suspect else None,
            revert=suspect.sha if suspect is not None and suspect.origin != "initial" else None,
        )
        self.post_message(toast)
        self.post_message(Reload(Part.HEARTBEAT))

    @work(group=COMMAND_GROUP, exit_on_error=False, name="pause or resume the heartbeat")
    async def toggle_pause(self) -> None:
        model = self.model
        paused = bool(model.heartbeat and model.heartbeat.paused)
        since = model.applied_seq
        status = await controls.set_paused(self.agent.client, not paused)
        model.apply_reload(Part.HEARTBEAT, status, since=since)
        self.draw(Part.HEARTBEAT)
        self.notify("heartbeat resumed" if paused else "heartbeat paused", timeout=3)
