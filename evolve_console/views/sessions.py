"""View 3, sessions: every session the engine knows, its frozen prompt exactly as sent, its history."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from engine.protocol import SessionInfo

from ..detail import DetailPane, Part
from ..format import date_time, short
from ..table import KeyedTable


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
    def row(s: SessionInfo) -> tuple[str, list[Any]]:
        model = s.model or {}
        system = s.system
        return str(s.id), [
            short(s.id, 18),
            short(s.title, 22),
            s.agent or "-",
            f"{model.get('providerID')}/{model.get('modelID')}" if model else "-",
            f"{sum(len(x) for x in system):,} chars" if system else Text("opencode's", style="dim"),
            str(len(s.notifications or [])),
        ]

    def show_session(self, s: SessionInfo) -> None:
        head = Text()
        head.append(s.id, style="bold")
        if s.title:
            head.append(f"  {s.title}")
        state = "busy" if s.busy else "idle"
        head.append(f"\nagent {s.agent or '-'} · {state} · frozen {date_time(s.frozen_at)}")
        system = s.system
        text = "\n\n──── next system message ────\n\n".join(system) if system else ""
        lines = []
        for entry in (s.history or [])[-20:]:
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
                Part(
                    "notifications",
                    "notifications received",
                    "\n\n".join(f"{date_time(n.at)}  {n.text}" for n in s.notifications),
                ),
                Part("history", "recent history", "\n".join(lines)),
            ],
        )
