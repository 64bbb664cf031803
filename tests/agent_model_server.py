"""A local model server that speaks the real protocols of coding-agent clients and plays a scripted
agent, for tests that drive OpenCode and Claude Code against `sage mcp` (test_agent_clients.py).

Protocols (streaming, as the clients use them):
- OpenAI chat completions (`POST /v1/chat/completions`, SSE `chat.completion.chunk`s with
  `tool_calls` deltas): OpenCode through `@ai-sdk/openai-compatible`;
- Anthropic Messages (`POST /v1/messages`, SSE `message_start` ... `message_stop` with `tool_use`
  blocks and `input_json_delta`s; `POST /v1/messages/count_tokens`): Claude Code.

The agent (`next_step`) is stateless: each request carries the whole conversation, from which it
reads the SAGE tool calls made so far and the results the client passed back, and chooses the
next call. Requests without SAGE's tools (titles, summaries) get a short text. Every request and
the agent's decision are recorded in `log` so that a test can check what the model actually saw.
The agent: status -> open_operator -> retrieve -> evaluate without decisions (refused) -> evaluate
a kernel that runs but is wrong -> diagnose it -> retrieve -> evaluate the fix -> finish_operator
-> a final text.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SIG = "#include <stdint.h>\nvoid sage_kernel(const float* restrict x, float* restrict out, int64_t N) {\n"
WRONG = SIG + "  for (int64_t i = 0; i < N; ++i)\n    out[i] = x[i];\n}\n"  # runs; forgets the factor 2
RIGHT = SIG + "  for (int64_t i = 0; i < N; ++i)\n    out[i] = 2.0f * x[i];\n}\n"
FINAL = "SAGE session complete."


@dataclass
class SageCall:
    tool: str  # without the client's prefix
    arguments: dict[str, Any]
    text: str  # the result as the client passed it to the model
    is_error: bool = False

    @property
    def result(self) -> dict[str, Any]:
        """The JSON object in the result text ({} if none)."""
        start = self.text.find("{")
        if start < 0:
            return {}
        try:
            value, _ = json.JSONDecoder().raw_decode(self.text[start:])
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


def _decisions(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"id": i["id"], "decision": "NOT ADOPTED", "rationale": "not needed for an elementwise doubling"}
        for i in items
    ]


def next_step(calls: list[SageCall]) -> tuple[str, dict[str, Any]] | None:
    """The next SAGE tool call (bare name, arguments), or None when the session is done."""
    done = [c.tool for c in calls]
    retrieved = [c.result.get("items", []) for c in calls if c.tool == "retrieve"]
    n_eval = done.count("evaluate")
    if "status" not in done:
        return "status", {}
    if "open_operator" not in done:
        return "open_operator", {}
    if "retrieve" not in done:
        return "retrieve", {}
    if n_eval == 0:  # no adoption decisions: the trace-completeness hook refuses
        return "evaluate", {"code": WRONG, "adoptions": [], "diagnosis": "first attempt"}
    if n_eval == 1:
        return "evaluate", {
            "code": WRONG,
            "adoptions": _decisions(retrieved[-1]),
            "diagnosis": "a flat loop over N",
        }
    if "diagnose" not in done:
        return "diagnose", {"code": WRONG}
    if done.count("retrieve") == 1:
        return "retrieve", {}
    if n_eval == 2:
        return "evaluate", {
            "code": RIGHT,
            "adoptions": _decisions(retrieved[-1]),
            "diagnosis": "the mismatch showed out = x: multiply by 2",
        }
    if "finish_operator" not in done:
        return "finish_operator", {}
    return None


def bare(name: str) -> str:
    """`sage_evaluate` (OpenCode), `mcp__sage__evaluate` (Claude Code) -> `evaluate`."""
    return re.sub(r"^(mcp__sage__|sage_)", "", name)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(c.get("text", c.get("content", ""))) if isinstance(c, dict) else str(c) for c in content
        )
    return "" if content is None else str(content)


def openai_calls(messages: list[dict[str, Any]]) -> list[SageCall]:
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    calls: list[SageCall] = []
    for m in messages:
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function", {})
            pending[tc.get("id", "")] = (fn.get("name", ""), json.loads(fn.get("arguments") or "{}"))
        if m.get("role") == "tool" and m.get("tool_call_id") in pending:
            name, args = pending.pop(m["tool_call_id"])
            calls.append(SageCall(bare(name), args, _text_of(m.get("content"))))
    return calls


def anthropic_calls(messages: list[dict[str, Any]]) -> list[SageCall]:
    pending: dict[str, tuple[str, dict[str, Any]]] = {}
    calls: list[SageCall] = []
    for m in messages:
        content = m.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                pending[block["id"]] = (block["name"], block.get("input") or {})
            elif block.get("type") == "tool_result" and block.get("tool_use_id") in pending:
                name, args = pending.pop(block["tool_use_id"])
                calls.append(
                    SageCall(bare(name), args, _text_of(block.get("content")), bool(block.get("is_error")))
                )
    return calls


@dataclass
class AgentModelServer:
    """Both protocols on one ephemeral 127.0.0.1 port, in a background thread."""

    log: list[dict[str, Any]] = field(default_factory=list)
    _httpd: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    # ---- the agent ------------------------------------------------------------------------------
    def decide(self, protocol: str, body: dict[str, Any]) -> tuple[str, dict[str, Any]] | str:
        """A tool call (client's tool name, arguments) or a text."""
        tools = body.get("tools") or []
        names = [t.get("function", {}).get("name") or t.get("name", "") for t in tools]
        sage = {bare(n): n for n in names if n and bare(n) != n}
        messages = body.get("messages") or []
        calls = (openai_calls if protocol == "openai" else anthropic_calls)(messages)
        calls = [c for c in calls if c.tool != "ToolSearch"]
        entry: dict[str, Any] = {"protocol": protocol, "tools": names, "calls": [c.__dict__ for c in calls]}
        self.log.append(entry)
        if not tools:
            entry["reply"] = "text"
            return "SAGE kernel session"
        if (
            not sage
            and "ToolSearch" in names
            and not any(
                block.get("type") == "tool_use" and block.get("name") == "ToolSearch"
                for m in messages
                if isinstance(m.get("content"), list)
                for block in m["content"]
            )
        ):  # Claude Code defers MCP tools behind its tool search
            entry["reply"] = "ToolSearch"
            return "ToolSearch", {
                "query": "sage status open_operator retrieve evaluate diagnose finish_operator",
                "max_results": 10,
            }
        step = next_step(calls)
        if step is None:
            entry["reply"] = "final"
            return FINAL
        tool, arguments = step
        if tool not in sage:
            entry["reply"] = f"missing tool {tool}"
            return f"I cannot see the SAGE tool {tool}; tools offered: {names}"
        entry["reply"] = tool
        return sage[tool], arguments

    # ---- the protocols --------------------------------------------------------------------------
    @staticmethod
    def openai_events(step: tuple[str, dict[str, Any]] | str) -> list[dict[str, Any]]:
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": "sage-agent",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        usage = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        if isinstance(step, str):
            return [chunk({"role": "assistant", "content": step}), {**chunk({}, "stop"), "usage": usage}]
        name, arguments = step
        call = {
            "index": 0,
            "id": f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return [
            chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
            {**chunk({}, "tool_calls"), "usage": usage},
        ]

    @staticmethod
    def anthropic_events(
        step: tuple[str, dict[str, Any]] | str, model: str
    ) -> list[tuple[str, dict[str, Any]]]:
        msg_id = f"msg_{uuid.uuid4().hex[:16]}"
        start = {
            "type": "message_start",
            "message": {
                "id": msg_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 100, "output_tokens": 1},
            },
        }
        events: list[tuple[str, dict[str, Any]]] = [("message_start", start)]
        if isinstance(step, str):
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": step}
            stop = "end_turn"
        else:
            name, arguments = step
            block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:16]}", "name": name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments)}
            stop = "tool_use"
        events += [
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 20},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return events

    # ---- the HTTP server ------------------------------------------------------------------------
    def start(self) -> AgentModelServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[tuple[str | None, Any]]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for name, data in events:
                    head = f"event: {name}\n" if name else ""
                    text = data if isinstance(data, str) else json.dumps(data)
                    self.wfile.write(f"{head}data: {text}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

            def do_GET(self) -> None:
                if self.path.split("?")[0].endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": "sage-agent", "object": "model"}]})
                else:
                    self._json(404, {"error": "not found"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.split("?")[0]
                try:
                    if path.endswith("/chat/completions"):
                        step = server.decide("openai", body)
                        events = server.openai_events(step)
                        if body.get("stream"):
                            self._sse([(None, e) for e in events] + [(None, "[DONE]")])
                        else:
                            self._json(200, _openai_whole(events))
                    elif path.endswith("/messages/count_tokens"):
                        self._json(200, {"input_tokens": 100})
                    elif path.endswith("/messages"):
                        step = server.decide("anthropic", body)
                        events = server.anthropic_events(step, str(body.get("model", "claude")))
                        if body.get("stream"):
                            self._sse(list(events))
                        else:
                            self._json(200, _anthropic_whole(events))
                    else:
                        self._json(404, {"error": f"no route {path}"})
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> AgentModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _openai_whole(events: list[dict[str, Any]]) -> dict[str, Any]:
    first, last = events[0], events[-1]
    delta = first["choices"][0]["delta"]
    message = {
        "role": "assistant",
        "content": delta.get("content"),
        **({"tool_calls": delta["tool_calls"]} if delta.get("tool_calls") else {}),
    }
    return {
        **{k: first[k] for k in ("id", "created", "model")},
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": last["choices"][0]["finish_reason"]}],
        "usage": last.get("usage"),
    }


def _anthropic_whole(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    message = dict(events[0][1]["message"])
    block = dict(events[1][1]["content_block"])
    delta = events[2][1]["delta"]
    if block["type"] == "text":
        block["text"] = delta["text"]
    else:
        block["input"] = json.loads(delta["partial_json"])
    message["content"] = [block]
    message["stop_reason"] = events[4][1]["delta"]["stop_reason"]
    return message
