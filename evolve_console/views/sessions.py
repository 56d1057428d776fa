"""View 3, sessions: every session the engine knows, and the selected one's context as the model saw
it on its latest request: the system prompt exactly as sent, the tools offered, and the messages."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal

from engine.protocol import SessionInfo

from ..agent import Agent
from ..describe import message_lines
from ..detail import DetailPane, Part
from ..format import as_json, date_time, session_label, size
from ..model import Part as ModelPart
from ..palette import Command
from ..table import KeyedTable
from .base import FOLLOW, MORE, TableView


class SessionsView(TableView):
    """Every session the engine knows, and the selected one's context (fetched when selected, and
    again when the session changes)."""

    NAME = "sessions"
    LABEL = "Sessions"
    PARTS = frozenset({ModelPart.SESSIONS})
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "t", "toggle_schemas", "Schemas", id="sessions.schemas", tooltip="The tools offered, with schemas"
        ),
        FOLLOW,
        MORE,
    ]
    EMPTY = (
        "Sessions appear here as a connected opencode opens them: each chat, and the heartbeat's own "
        "session at its first tick."
    )
    COMMANDS = (Command("sessions: tools offered with schemas", "toggle_schemas", "t in view 3"),)

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent)
        self.session: SessionInfo | None = None  # the selected session, with its history
        self.schemas_open = False  # the tools offered are shown with their schemas

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
                tells_following=True,
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
            # The frozen prompt's size; without one, the next request composes it (it is opencode's
            # own only when no hook gives one, which the console cannot know).
            f"{sum(len(x) for x in system):,} ch" if system else Text("not frozen", style="dim"),
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
                    empty=(
                        "(not frozen: its next request composes it from the hooks, "
                        "or uses opencode's own prompt when no hook gives one)"
                    ),
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

    def draw(self, part: ModelPart) -> None:
        self.show_rows([self.row(s) for s in self.model.sessions.values()])
        self._refresh_detail()

    def highlighted(self, key: str) -> None:
        self.load_session(key)

    @work(exclusive=True, group="session-detail", exit_on_error=False, name="load the session")
    async def load_session(self, session_id: str) -> None:
        session = await self.agent.session(session_id)
        self.session = session
        self.show_session(session, self.schemas_open)

    def _refresh_detail(self) -> None:
        """The selected session changed (busy, tokens, a notification): show it anew."""
        key = self.selected_key()
        known = self.model.sessions.get(key) if key else None
        shown = self.session
        if (
            known is not None
            and shown is not None
            and shown.id == key
            and known.updated_at != shown.updated_at
        ):
            self.load_session(key)

    def action_toggle_schemas(self) -> None:
        self.schemas_open = not self.schemas_open
        if self.session is not None:
            self.show_session(self.session, self.schemas_open)
