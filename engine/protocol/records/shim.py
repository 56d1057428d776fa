"""What the opencode plugin sends and what it gets back: one request and one answer per route it
calls (docs/opencode.md, "The engine's HTTP API"). The plugin is JavaScript: these records describe
its traffic for Python callers (the benchmarks) and for the contract's table."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .base import JSONDict, Record

History = list[Any]  # opencode's messages, each {info: {...}, parts: [{...}, ...]}


@dataclass
class ConnectRequest(Record):
    url: str  # where the engine reaches this opencode back
    directory: str
    token: str | None = None
    mode: str | None = None  # in-process | server
    shim_version: str | None = None
    command: str | None = None  # opencode's subcommand: run, serve, or None (the TUI)


@dataclass
class Connected(Record):
    id: str  # the connection's id, sent back with every call (x-evolve-connection)
    config: JSONDict = field(default_factory=dict)
    own_call_prefixes: list[str] = field(default_factory=list)  # how opencode's own LLM calls begin
    handled: list[str] = field(default_factory=list)  # the stages some hook handles


@dataclass
class DisconnectRequest(Record):
    id: str | None = None


@dataclass
class SystemRequest(Record):
    session: str | None = None
    system: list[str] = field(default_factory=list)
    model: dict[str, str] | None = None  # {providerID, modelID}
    tools: list[str] | None = None
    history: History | None = None
    turn: str | None = None


@dataclass
class SystemPrompt(Record):
    """`system` replaces opencode's (None keeps it); `cacheable` lets the plugin keep it for the
    session; `cancel` (a text) fails the request."""

    system: list[str] | None = None
    reason: str = ""
    cacheable: bool = False
    cancel: str | None = None


@dataclass
class ChatMessageRequest(Record):
    session: str | None = None
    agent: str | None = None
    model: dict[str, str] | None = None
    synthetic: bool = False


@dataclass
class ChatMessageAnswer(Record):
    ok: bool = True
    frozen: bool = False  # whether the session still has a frozen prompt


@dataclass
class ToolBeforeRequest(Record):
    session: str | None = None
    tool: str = ""
    call_id: str | None = None
    args: Any = None
    own: bool = False  # one of evolve's tools
    wait: bool = False  # answer after before_tool (a hook handles it); else 202 at once
    history: History | None = None


@dataclass
class ToolBeforeAnswer(Record):
    ok: bool | None = None  # 202, not waited for
    deny: str | None = None  # refuse the call with this text
    args: JSONDict | None = None  # the call's arguments, rewritten


@dataclass
class ToolAfterRequest(Record):
    session: str | None = None
    tool: str = ""
    call_id: str | None = None
    title: Any = None
    output: Any = None
    wait: bool = False
    args: Any = None  # with `wait`


@dataclass
class ToolAfterAnswer(Record):
    ok: bool | None = None  # 202, not waited for
    result: str | None = None  # replaces what the model receives


@dataclass
class CompactingRequest(Record):
    session: str | None = None
    prompt: str | None = None
    history: History | None = None


@dataclass
class CompactingAnswer(Record):
    prompt: str | None = None  # None: opencode's own


@dataclass
class BeforeTurnRequest(Record):
    session: str
    history: History | None = None
    tools: list[str] | None = None


@dataclass
class BeforeTurnAnswer(Record):
    system: list[str] | None = None  # added to this request's system prompt only
    skip: str | None = None  # ends the loop with this text


@dataclass
class TextCompleteRequest(Record):
    """A text part of a response is complete (opencode's `experimental.text.complete`, forwarded only
    when a hook handles after_turn)."""

    session: str
    message: JSONDict = field(default_factory=dict)  # {id, agent, summary?, ...}
    part: str | None = None  # the text part's id
    text: str = ""
    parts: list[JSONDict] = field(default_factory=list)  # the response's parts the plugin saw
    turn: str | None = None


@dataclass
class TextCompleteAnswer(Record):
    text: str | None = None  # the text opencode stores for the part instead; absent: unchanged


@dataclass
class AssistantRequest(Record):
    session: str
    message: JSONDict = field(default_factory=dict)  # {id, agent, error?, tokens?, ...}
    parts: list[JSONDict] = field(default_factory=list)
    history: History | None = None


@dataclass
class OpencodeEvent(Record):
    type: str
    properties: JSONDict = field(default_factory=dict)


@dataclass
class ToolsOffered(Record):
    tools: list[JSONDict] = field(default_factory=list)  # {name, description, parameters}
