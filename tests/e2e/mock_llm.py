"""A mock OpenAI-compatible chat-completions server for end-to-end tests against real opencode.

It records every request and answers from a script: each main request (one with tools) takes the next
scripted reply; title and compaction requests are recognised by their system prompt and answered
without consuming the script. Replies stream as opencode expects (SSE chunks, then `[DONE]`).
"""

from __future__ import annotations

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
    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    delay: float = 0.0
    usage: tuple[int, int] = (11, 3)  # prompt, completion tokens


@dataclass
class Request:
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


class MockLLM:
    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._script: deque[Reply | Callable[[Request], Reply]] = deque()
        self._lock = threading.Lock()
        self._calls = 0
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                req = Request(body, {k.lower(): v for k, v in self.headers.items()}, time.time())
                reply = mock._reply_for(req)
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
                data = json.dumps({"object": "list", "data": [{"id": "mock", "object": "model"}]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---- scripting ----------------------------------------------------------------------------

    def script(self, *replies: Reply | Callable[[Request], Reply]) -> None:
        with self._lock:
            self._script.extend(replies)

    def _reply_for(self, req: Request) -> Reply:
        with self._lock:
            self.requests.append(req)
            if req.kind == "title":
                return Reply(text="Test title")
            if req.kind == "compaction":
                return Reply(text="Summary of the conversation so far.")
            if not self._script:
                return Reply(text="ok")
            item = self._script.popleft()
        return item(req) if callable(item) else item

    def _chunks(self, reply: Reply) -> list[dict[str, Any]]:
        self._calls += 1
        base = {
            "id": f"chatcmpl-{self._calls}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": "mock",
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
                    "id": f"call_{self._calls}_{i}",
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
