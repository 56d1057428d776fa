"""View 3, sessions: every session the engine knows, and the selected one's context as the model saw
it on its latest request: the system prompt exactly as sent, the tools offered, and the messages."""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from engine.protocol import SessionInfo

from ..detail import DetailPane, Part
from ..format import as_json, date_time, session_label, short, size
from ..table import KeyedTable

NOTIFICATION_MARK = "<assistant-notification>"


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def message_lines(entry: dict[str, Any]) -> tuple[str, str]:
    """A history entry as (its heading, its body): what the model read of that message."""
    role = str(entry.get("role") or "?")
    parts = [p for p in entry.get("parts") or [] if isinstance(p, dict)]
    body: list[str] = []
    for part in parts:
        kind = part.get("type")
        if kind == "text" and part.get("text"):
            body.append(str(part["text"]))
        elif kind == "reasoning" and part.get("text"):
            body.append(f"(reasoning) {part['text']}")
        elif kind == "tool":
            found = part.get("state")
            state: dict[str, Any] = found if isinstance(found, dict) else {}
            call = f"→ tool {part.get('tool')} ({state.get('status') or '?'})"
            if "input" in state:
                call += f"\n  arguments: {short(_text_of(state['input']), 2000)}"
            if state.get("output") is not None:
                call += f"\n  result: {short(_text_of(state['output']), 2000)}"
            if state.get("error"):
                call += f"\n  error: {state['error']}"
            body.append(call)
    text = "\n".join(body)
    kind = role
    if role == "user" and NOTIFICATION_MARK in text:
        kind = "notification (to the agent)"
    elif role == "user" and parts and all(p.get("synthetic") for p in parts):
        kind = "user (sent by evolve)"
    agent = f" · agent {entry['agent']}" if entry.get("agent") else ""
    return f"{kind}{agent} · {size(text)}", text


class SessionsView(Vertical):
    """Every session the engine knows, and the selected one's context."""

    def compose(self) -> ComposeResult:
        with Horizontal(classes="split sessions-split"):
            yield KeyedTable(
                [
                    ("session", "session"),
                    ("agent", "agent"),
                    ("state", "state"),
                    ("tokens", "tokens"),
                    ("prompt", "prompt"),
                    ("notes", "notif"),
                ],
                id="sessions-table",
            )
            yield DetailPane("select a session", id="session-detail", classes="detail")

    @staticmethod
    def row(s: SessionInfo) -> tuple[str, list[Any]]:
        system = s.system
        return str(s.id), [
            session_label(s.id, s.title),
            s.agent or "-",
            Text("busy", style="bold yellow") if s.busy else Text("idle", style="dim"),
            f"{s.tokens:,}" if s.tokens is not None else "-",
            f"{sum(len(x) for x in system):,} ch" if system else Text("opencode's", style="dim"),
            str(len(s.notifications)),
        ]

    def show_session(self, s: SessionInfo, tools_open: bool = False) -> None:
        model = s.model or {}
        head = Text()
        head.append(s.title or "(untitled)", style="bold")
        head.append(f"\n{s.id}")
        head.append(f"\nagent {s.agent or '-'} · model ")
        head.append(f"{model.get('providerID')}/{model.get('modelID')}" if model else "-")
        head.append(f" · {'busy' if s.busy else 'idle'}", style="bold yellow" if s.busy else "")
        head.append(f" · {s.tokens:,} tokens" if s.tokens is not None else " · tokens not counted yet")
        head.append(f"\nfirst seen {date_time(s.created_at)} · prompt frozen {date_time(s.frozen_at)}")
        if s.connection:
            head.append(f"\nthrough opencode connection {s.connection}")
        system = "\n\n──── next system message ────\n\n".join(s.system) if s.system else ""
        history = s.history or []
        messages = []
        total = len(system)
        for entry in history:
            heading, text = message_lines(entry)
            total += len(text)
            messages.append(f"──── {heading} ────\n{text}")
        head.append(f"\ncontext of its latest request: {size(total)} in {len(history)} messages")
        tools = s.tools or []
        if not tools:
            offered = "(opencode has not said yet which tools it offers)"
        elif tools_open:
            offered = "\n\n".join(
                f"{t.get('name')}: {t.get('description') or ''}\n{as_json(t.get('parameters'))}"
                for t in tools
            )
        else:
            offered = ", ".join(str(t.get("name")) for t in tools) + "\n(t: with their schemas)"
        self.query_one(DetailPane).show(
            head,
            [
                Part(
                    "system",
                    f"system prompt, exactly as sent ({size(system)})",
                    system,
                    empty="(not frozen: opencode's own prompt is used)",
                ),
                Part("tools", f"tools offered ({len(tools)})", offered),
                Part(
                    "messages", f"messages ({len(history)})", "\n\n".join(messages), empty="(none seen yet)"
                ),
                Part(
                    "notifications",
                    f"notifications it received ({len(s.notifications)})",
                    "\n\n".join(
                        f"{date_time(n.at)}"
                        + (f" · about {n.change[:10]}" if n.change else "")
                        + f"\n{n.text}"
                        for n in s.notifications
                    ),
                ),
            ],
        )
