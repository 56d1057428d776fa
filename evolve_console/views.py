"""The console's five views: hook runs, stage results, sessions, heartbeat, self-modifications."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, ProgressBar, Static, Switch

from .detail import DetailPane, Part
from .format import as_json, clock_time, countdown, date_time, duration, short
from .line import Line
from .section import Section
from .table import KeyedTable


def run_summary(run: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "started_at", "stage", "hook", "session", "duration_ms", "error", "exit_code", "signal")
    return {k: run.get(k) for k in keys}


def status_text(run: dict[str, Any]) -> Text:
    if run.get("error"):
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

    def filters(self) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in ("stage", "hook", "session"):
            text = self.query_one(f"#filter-{name}", Input).value.strip()
            if text:
                values[name] = text
        if self.query_one("#filter-failed", Switch).value:
            values["failed"] = True
        return values

    def matcher(self) -> Callable[[dict[str, Any]], bool]:
        """Whether a run passes the filters as they are now (read once for a batch of runs)."""
        f = self.filters()
        failed = f.get("failed")
        fields = [(k, f[k]) for k in ("stage", "hook", "session") if k in f]

        def matches(run: dict[str, Any]) -> bool:
            if failed and not run.get("error"):
                return False
            return all(run.get(k) == value for k, value in fields)

        return matches

    @staticmethod
    def row(run: dict[str, Any]) -> tuple[str, list[Any]]:
        return str(run["id"]), [
            clock_time(run.get("started_at")),
            run.get("stage") or "",
            run.get("hook") or "",
            short(run.get("session"), 24),
            duration(run.get("duration_ms")),
            status_text(run),
        ]

    def show_run(self, run: dict[str, Any]) -> None:
        head = Text()
        head.append(f"{run.get('stage')}  hooks/{run.get('hook')}", style="bold")
        head.append(f"\nsession {run.get('session') or '-'} · started {date_time(run.get('started_at'))} UTC")
        head.append(f" · {duration(run.get('duration_ms'))}")
        if run.get("exit_code") is not None:
            head.append(f" · exit {run.get('exit_code')}")
        if run.get("signal"):
            head.append(f" · killed by {run.get('signal')}", style="red")
        stderr = run.get("stderr") or ""
        if run.get("stderr_truncated"):
            stderr += "\n[stderr was cut by the engine at 256 KiB]"
        result = run.get("result")
        lines = run.get("stdout_lines") or []
        self.query_one(DetailPane).show(
            head,
            [
                Part("error", "error", run.get("error") or "", empty="(no error)"),
                Part("stderr", "stderr", stderr),
                Part("result", "parsed result", "" if result is None else as_json(result)),
                Part(
                    "stdout", "stdout lines", "\n".join(f"{i + 1:>4}  {line}" for i, line in enumerate(lines))
                ),
                Part("logs", "log lines", "\n".join(str(x) for x in run.get("logs") or [])),
                Part("input", "input (JSON on stdin)", as_json(run.get("input"))),
            ],
        )


class StagesView(Vertical):
    """Each stage dispatch: which hooks ran, the merged output, whether recover stepped in."""

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
            )
            yield DetailPane("select a stage result", id="stage-detail", classes="detail")
        yield Line(id="stages-status", classes="status-line")

    @staticmethod
    def row(d: dict[str, Any]) -> tuple[str, list[Any]]:
        failed = d.get("failed") or []
        return str(d["id"]), [
            clock_time(d.get("started_at")),
            d.get("stage") or "",
            short(d.get("session"), 24),
            str(len(d.get("hooks") or [])),
            Text(", ".join(failed), style="red") if failed else "",
            Text("recovered", style="yellow") if d.get("recovered") else "",
            duration(d.get("duration_ms")),
        ]

    def show_dispatch(self, d: dict[str, Any]) -> None:
        head = Text()
        head.append(f"{d.get('stage')}", style="bold")
        head.append(f" · session {d.get('session') or '-'} · {duration(d.get('duration_ms'))}\n")
        head.append("hooks: " + (", ".join(d.get("hooks") or []) or "none"))
        if d.get("failed"):
            head.append("\nfailed: " + ", ".join(d["failed"]), style="red")
        if d.get("recovered"):
            head.append("\nrecover stepped in: its output is merged below", style="yellow")
        self.query_one(DetailPane).show(
            head,
            [
                Part("merged", "merged output", as_json(d.get("merged"))),
                Part("context", "input context", as_json(d.get("context"))),
            ],
        )


class SessionsView(Vertical):
    """Every session the engine knows: its frozen prompt exactly as sent, history, notifications."""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("session", "session"),
                    ("title", "title"),
                    ("agent", "agent"),
                    ("model", "model"),
                    ("prompt", "prompt"),
                    ("notes", "notifications"),
                ],
                id="sessions-table",
            )
            yield DetailPane("select a session", id="session-detail", classes="detail")

    @staticmethod
    def row(s: dict[str, Any]) -> tuple[str, list[Any]]:
        model = s.get("model") or {}
        system = s.get("system")
        return str(s["id"]), [
            short(s["id"], 18),
            short(s.get("title"), 22),
            s.get("agent") or "-",
            f"{model.get('providerID')}/{model.get('modelID')}" if model else "-",
            f"{sum(len(x) for x in system):,} chars" if system else Text("opencode's", style="dim"),
            str(len(s.get("notifications") or [])),
        ]

    def show_session(self, s: dict[str, Any]) -> None:
        head = Text()
        head.append(s["id"], style="bold")
        if s.get("title"):
            head.append(f"  {s['title']}")
        head.append(
            f"\nagent {s.get('agent') or '-'} · busy {s.get('busy')} · frozen {date_time(s.get('frozen_at'))}"
        )
        system = s.get("system")
        text = "\n\n──── next system message ────\n\n".join(system) if system else ""
        lines = []
        for entry in (s.get("history") or [])[-20:]:
            parts = entry.get("parts") or []
            texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
            tools = [p.get("tool", "") for p in parts if isinstance(p, dict) and p.get("type") == "tool"]
            line = f"{entry.get('role')}: {short(' '.join(texts), 300)}"
            if tools:
                line += f"  [tools: {', '.join(tools)}]"
            lines.append(line)
        self.query_one(DetailPane).show(
            head,
            [
                Part(
                    "system",
                    "frozen system prompt (exactly as sent)",
                    text,
                    empty="(not frozen: opencode's own prompt is used)",
                ),
                Part("notifications", "notifications received", "\n\n".join(s.get("notifications") or [])),
                Part("history", "recent history", "\n".join(lines)),
            ],
        )


class HeartbeatView(Vertical):
    """Interval, countdown, state, the cleanup gauges, and the actions."""

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

    def show_status(self, st: dict[str, Any], now: float) -> None:
        paused, running = st.get("paused"), st.get("running")
        state = "running" if running else "idle"
        if not st.get("enabled"):
            timer = "timer disabled (heartbeat_ms < 0): fire by hand"
        elif paused:
            timer = "paused"
        elif st.get("next_at"):
            timer = f"next tick in {countdown(st['next_at'] - now)} (at {clock_time(st['next_at'])} UTC)"
        else:
            timer = "waiting for opencode to connect"
        model = st.get("model") or {}
        text = Text()
        text.append(f"{state.upper()}", style="bold green" if running else "bold")
        text.append(f" · {'PAUSED · ' if paused else ''}{timer}\n")
        text.append(
            f"interval {countdown((st.get('interval_ms') or 0) / 1000)} · cleanup {st.get('cleanup')}"
        )
        text.append(
            f" · model {model.get('providerID')}/{model.get('modelID')}" if model else " · model: none yet"
        )
        text.append(
            f"\nsession {st.get('session') or '(none yet)'} · last heartbeat {st.get('time') or 'never'}"
        )
        self.query_one("#hb-summary", Static).update(text)
        self._gauge("count", st.get("count"), st.get("count_threshold"), "heartbeats since cleanup")
        self._gauge("tokens", st.get("tokens"), st.get("tokens_threshold"), "tokens in the heartbeat session")
        last = st.get("last")
        if last:
            lines = [
                f"{last.get('trigger')} tick at {date_time(last.get('started_at'))} UTC: {last.get('outcome')}"
            ]
            if last.get("reason"):
                lines.append(f"reason: {last['reason']}")
            if last.get("cleanup"):
                lines.append(f"cleanup: {as_json(last['cleanup'])}")
            if last.get("user"):
                lines.append(f"sent: [heartbeat] {short(last['user'], 400)}")
            lines.append(f"took {duration(last.get('duration_ms'))}")
            self.query_one("#hb-last", Section).show("\n".join(lines))
        else:
            self.query_one("#hb-last", Section).show("", empty="(no tick yet)")
        self.query_one("#hb-pause", Button).display = not paused
        self.query_one("#hb-resume", Button).display = bool(paused)

    def _gauge(self, name: str, value: Any, threshold: Any, label: str) -> None:
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


class ChangesView(Vertical):
    """The workspace's git history with origin and review state, and the selected change's diff."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="change-actions"):
            yield Button("Approve (a)", id="change-approve", variant="success")
            yield Button("Revert (r)", id="change-revert", variant="error")
            yield Button("Reject pending (d)", id="change-reject", variant="warning")
        with Horizontal(classes="split"):
            yield KeyedTable(
                [
                    ("time", "time"),
                    ("origin", "origin"),
                    ("change", "change"),
                    ("files", "files"),
                    ("review", "review"),
                ],
                id="changes-table",
            )
            yield DetailPane("select a change", id="change-detail", classes="detail")

    ORIGIN_STYLES = {
        "agent": "bold magenta",
        "heartbeat": "cyan",
        "operator": "green",
        "external": "yellow",
        "pending": "bold red",
        "hook": "blue",
    }

    def row(self, c: dict[str, Any]) -> tuple[str, list[Any]]:
        origin = c.get("origin") or "manual"
        trailers = c.get("trailers") or {}
        who = origin
        if origin == "agent" and trailers.get("session"):
            who = f"agent {short(trailers.get('session'), 14)}"
        review = c.get("review")
        if origin == "pending":
            review_text = Text("awaits review", style="bold red")
        elif review:
            review_text = Text("reviewed", style="green")
        else:
            review_text = Text("not reviewed", style="dim")
        return str(c["key"]), [
            clock_time(c.get("time")),
            Text(who, style=self.ORIGIN_STYLES.get(origin, "")),
            short(c.get("subject"), 34),
            short(", ".join(c.get("files") or []), 22),
            review_text,
        ]

    def show_change(self, c: dict[str, Any], diff: str, truncated: bool) -> None:
        head = Text()
        head.append(c.get("subject") or "", style="bold")
        trailers = c.get("trailers") or {}
        head.append(f"\n{c.get('origin')} · {date_time(c.get('time'))} UTC")
        if c.get("sha"):
            head.append(f" · {str(c['sha'])[:12]}")
        for key in ("tool", "session", "call", "stage", "file"):
            if trailers.get(key):
                head.append(f"\n{key}: {trailers[key]}")
        if c.get("review"):
            head.append(f"\nreview: {c['review']}", style="green")
        if truncated:
            head.append("\n(diff truncated; see it in full with git show)", style="yellow")
        self.query_one(DetailPane).show(
            head, [Part("diff", "diff", diff, empty="(no textual changes)", language="diff")]
        )
