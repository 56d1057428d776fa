"""A scripted model: an OpenAI-compatible chat-completions server that answers from a script, not an
LLM. The end-to-end tests run real opencode against it, and `evolve demo` plays its agent with it.

It records every request and answers each main request (opencode's chat and heartbeat turns) with the
next scripted reply, a `Reply` or a function of the `Request` that came in (which can read the
conversation and the tool results opencode sent back); when the script is empty, the `responder` given
at construction answers, else a plain "ok". Title and compaction requests are recognised by their
system prompt and answered without consuming the script. Replies stream as opencode expects (SSE
chunks, then `[DONE]`).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TITLE_MARK = "You are a title generator"
COMPACTION_MARK = "You are a context summarization agent"


@dataclass
class Reply:
    """One answer: text, tool calls (name, arguments), both (text first), after a delay in seconds."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    usage: tuple[int, int] = (11, 3)  # prompt, completion tokens


@dataclass
class Request:
    """One request opencode sent: its JSON body, its headers (lower-case names), when it arrived."""

    body: dict[str, Any]
    headers: dict[str, str]
    at: float

    @property
    def system(self) -> list[str]:
        out = []
        for m in self.body.get("messages", []):
            if m.get("role") == "system":
                c = m.get("content")
                out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c or []))
        return out

    @property
    def kind(self) -> str:
        first = self.system[0] if self.system else ""
        if first.startswith(TITLE_MARK):
            return "title"
        if first.startswith(COMPACTION_MARK):
            return "compaction"
        return "main"

    @property
    def tools(self) -> dict[str, dict[str, Any]]:
        return {t["function"]["name"]: t["function"] for t in self.body.get("tools", []) or []}

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def text(self) -> str:
        return json.dumps(self.messages)

    @property
    def session(self) -> str | None:
        return self.headers.get("x-session-id")

    def user_texts(self) -> list[str]:
        """The text of every user message, oldest first."""
        return [_text(m.get("content")) for m in self.messages if m.get("role") == "user"]

    def last_user_text(self) -> str:
        """The text of the last user message ("" when there is none)."""
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def since_last_user(self) -> list[dict[str, Any]]:
        """The messages after the last user message: this turn's assistant tool calls and results."""
        messages = self.messages
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        return messages[last + 1 :]

    def tool_results(self) -> list[tuple[str, str]]:
        """(tool name, result text) of every tool result since the last user message, in order."""
        names: dict[str, str] = {}
        out: list[tuple[str, str]] = []
        for m in self.since_last_user():
            for call in m.get("tool_calls") or []:
                names[str(call.get("id"))] = str(call.get("function", {}).get("name"))
            if m.get("role") == "tool":
                out.append((names.get(str(m.get("tool_call_id")), "?"), _text(m.get("content"))))
        return out


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


Responder = Callable[[Request], Reply]


class MockLLM:
    """The scripted model server on a free loopback port (or `port`); `url` is its base URL."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        port: int = 0,
        model: str = "mock",
        title: str = "Test title",
    ) -> None:
        self.requests: list[Request] = []
        self.responder = responder
        self.model = model
        self.title = title
        self._script: deque[Reply | Responder] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                req = Request(body, {k.lower(): v for k, v in self.headers.items()}, time.time())
                try:
                    reply = mock._reply_for(req)
                except Exception as exc:  # a broken script answers with its error, visibly
                    reply = Reply(text=f"(the scripted model failed: {type(exc).__name__}: {exc})")
                if reply.delay:
                    time.sleep(reply.delay)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for chunk in mock._chunks(reply):
                    self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

            def do_GET(self) -> None:
                data = json.dumps(
                    {"object": "list", "data": [{"id": mock.model, "object": "model"}]}
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- scripting ----------------------------------------------------------------------------

    def script(self, *replies: Reply | Responder) -> None:
        """Queue replies for the next main requests, in order."""
        with self._lock:
            self._script.extend(replies)

    def _reply_for(self, req: Request) -> Reply:
        with self._lock:
            self.requests.append(req)
            if req.kind == "title":
                return Reply(text=self.title)
            if req.kind == "compaction":
                return Reply(text="Summary of the conversation so far.")
            if self._script:
                item: Reply | Responder | None = self._script.popleft()
            else:
                item = self.responder
        if item is None:
            return Reply(text="ok")
        return item(req) if callable(item) else item

    def _chunks(self, reply: Reply) -> list[dict[str, Any]]:
        n = next(self._ids)
        base = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
        }
        chunks: list[dict[str, Any]] = []
        if reply.tool_calls and reply.text:
            # Text first, then the calls, as models often answer.
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply.text}}]}
            )
        if reply.tool_calls:
            calls = [
                {
                    "index": i,
                    "id": f"call_{n}_{i}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
                for i, (name, args) in enumerate(reply.tool_calls)
            ]
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": calls}}]}
            )
            finish = "tool_calls"
        else:
            chunks.append(
                {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": reply.text}}]}
            )
            finish = "stop"
        prompt, completion = reply.usage
        chunks.append(
            {
                **base,
                "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )
        return chunks

    # ---- inspection ---------------------------------------------------------------------------

    def main_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.kind == "main"]

    def of_kind(self, kind: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.kind == kind]
