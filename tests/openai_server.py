"""A local HTTP server speaking the OpenAI chat-completions protocol, replying from a script.

For end-to-end tests that drive the real client code (no mocks), on 127.0.0.1 with an ephemeral
port, in a background thread::

    from openai_server import Failure, OpenAITestServer   # tests/ is on sys.path under pytest

    with OpenAITestServer(replies=["first", {"content": "second", "finish_reason": "length"}],
                          fail_first=[503, Failure(429, retry_after=0.05)],
                          served_models=["test-model"]) as server:
        model = make_model(f"openai:test-model@{server.base_url}")
        ...
        assert len(server.requests) == 4          # 2 failures + 2 replies
        assert server.requests[-1]["messages"][-1]["content"] == "..."

Routes: `POST /v1/chat/completions`, `GET /v1/models` (404 when `served_models=None`).

Replies are consumed in order, one per chat request that is not failed by `fail_first`. A reply is
- a string: the assistant content;
- a dict: `content`, `finish_reason` ("stop"), `model`, `usage` (a dict, or None to omit the field
  like some servers do), `delay_s` (sleep before answering), or `status` + `error` (+ `retry_after`)
  to answer with an HTTP error instead, or `raw` (any JSON value) to answer HTTP 200 with exactly
  that body (malformed responses);
- a `Failure(status, message, retry_after=...)`;
- a callable taking the request body and returning any of the above.
When the script is used up, `fallback` answers (if given), else HTTP 400 "script exhausted".
Default usage: prompt_tokens = words in all messages, completion_tokens = words in the reply.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ReplySpec = Any  # str | dict | Failure | Callable[[dict], str | dict | Failure]


@dataclass(frozen=True)
class Failure:
    """An HTTP error answer."""

    status: int
    message: str = "simulated failure"
    retry_after: float | str | None = None
    """Sent as the Retry-After header (seconds, or an HTTP date string)."""


class JSONTestServer:
    """Base: a threaded JSON-over-HTTP server with request recording. Subclasses implement `route`."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        """Bodies of the requests to the main route, in arrival order (failed ones included)."""
        self.hits: list[tuple[str, str]] = []
        """(method, path) of every request."""
        self.headers: list[dict[str, str]] = []
        """Request headers of every request, lower-cased names."""
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no 40 ms Nagle stalls

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                with server._lock:
                    server.hits.append((self.command, self.path))
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, payload, headers = server.route(self.command, self.path.split("?")[0], body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                try:
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                    self.close_connection = True

            do_GET = do_POST = _handle

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,),
                                        name=type(self).__name__, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> JSONTestServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started (use it as a context manager)")
        return self._port  # kept after stop(), for messages that name the URL

    @property
    def url(self) -> str:
        """Root URL, e.g. http://127.0.0.1:40123"""
        return f"http://127.0.0.1:{self.port}"

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        raise NotImplementedError


class OpenAITestServer(JSONTestServer):
    """Scripted OpenAI-compatible endpoint (see module docstring)."""

    def __init__(self, replies: Iterable[ReplySpec] = (), *, fail_first: Sequence[int | Failure] = (),
                 served_models: Sequence[str] | None = ("test-model",), fallback: ReplySpec | None = None,
                 prefix: str = "/v1") -> None:
        super().__init__()
        self.replies: list[ReplySpec] = list(replies)
        self.fail_first = [f if isinstance(f, Failure) else Failure(f) for f in fail_first]
        self.served_models = None if served_models is None else list(served_models)
        self.fallback = fallback
        self.prefix = prefix.rstrip("/")
        self._next = 0

    def __enter__(self) -> OpenAITestServer:
        self.start()
        return self

    @property
    def base_url(self) -> str:
        """What to put after `@` in an `openai:` spec, e.g. http://127.0.0.1:40123/v1"""
        return self.url + self.prefix

    def add_reply(self, reply: ReplySpec) -> None:
        with self._lock:
            self.replies.append(reply)

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        if method == "GET" and path == f"{self.prefix}/models":
            if self.served_models is None:
                return _error(Failure(404, "no /models route on this server"))
            return 200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "test"}
                                                    for m in self.served_models]}, {}
        if method == "POST" and path == f"{self.prefix}/chat/completions":
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return _error(Failure(400, "request body must be a JSON object with a messages list"))
            with self._lock:
                self.requests.append(body)
                number = len(self.requests)
                if number <= len(self.fail_first):
                    return _error(self.fail_first[number - 1])
                if self._next < len(self.replies):
                    spec: ReplySpec = self.replies[self._next]
                    self._next += 1
                elif self.fallback is not None:
                    spec = self.fallback
                else:
                    return _error(Failure(400, f"OpenAITestServer: script exhausted at request #{number}"))
            if callable(spec):
                spec = spec(body)
            return self._answer(body, spec)
        return _error(Failure(404, f"no route {method} {path}"))

    def _answer(self, body: dict[str, Any], spec: ReplySpec) -> tuple[int, Any, dict[str, str]]:
        if isinstance(spec, Failure):
            return _error(spec)
        if isinstance(spec, str):
            spec = {"content": spec}
        if spec.get("delay_s"):
            time.sleep(float(spec["delay_s"]))
        if "raw" in spec:
            return 200, spec["raw"], {}
        if "status" in spec:
            return _error(Failure(int(spec["status"]), str(spec.get("error", "error")),
                                  spec.get("retry_after")))
        content = str(spec.get("content", ""))
        payload: dict[str, Any] = {
            "id": f"chatcmpl-test-{len(self.requests)}", "object": "chat.completion",
            "created": int(time.time()),
            "model": spec.get("model", body.get("model", "test-model")),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": spec.get("finish_reason", "stop")}],
        }
        usage = spec.get("usage", "default")
        if usage == "default":
            prompt = sum(len(str(m.get("content", "")).split()) for m in body["messages"])
            completion = len(content.split())
            usage = {"prompt_tokens": prompt, "completion_tokens": completion,
                     "total_tokens": prompt + completion}
        if usage is not None:
            payload["usage"] = usage
        return 200, payload, {}


def _error(failure: Failure) -> tuple[int, Any, dict[str, str]]:
    headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
            429: "rate_limit_error"}.get(failure.status, "server_error")
    body = {"error": {"message": failure.message, "type": kind, "code": failure.status}}
    return failure.status, body, headers

