"""The embedded server's guard against slow and idle peers (uvicorn's httptools protocol).

`glassllm-sandbox` (and so `make run`) serves with uvicorn, which by itself waits forever
for a request's headers and body and for a client to read its answer: 64 stalled 8 MiB
uploads held +511 MiB, ten clients that never read a large answer held ~1 GB, and 1 100
connections that sent nothing took every file descriptor of the common 1 024 limit, so
no one else was served. The shipped nginx (deploy/nginx) has timeouts for all of these;
this protocol gives the embedded server the same, per connection, in the worker's event
loop (`GuardedHttpToolsProtocol`, handed to uvicorn as its ``http`` protocol):

- **Headers** (``GLASSLLM_HEADER_TIMEOUT_S``): a request's complete headers must arrive
  within this time of the connection opening or of the request's first byte; else the
  connection is closed, with ``408`` when part of a request had come (a slowloris).
- **Body** (``GLASSLLM_BODY_TIMEOUT_S``): while a request's body is being read, at most
  this long between two pieces of it; else ``408`` and close, and the partial body is
  dropped. Time while the server itself has paused reading does not count.
- **Send** (``GLASSLLM_SEND_TIMEOUT_S``): an answer waiting in the connection's write
  buffer must make progress (the client reads some of it) within this time; else the
  connection is aborted and the buffered answer freed. A training stream's client that
  stops reading is cut the same way, and its run stops.
- **Idle** (``GLASSLLM_KEEPALIVE_TIMEOUT_S``, uvicorn's ``timeout_keep_alive``): between
  two requests on one connection.
- **Open connections** (``GLASSLLM_MAX_CONNECTIONS``, per worker process): one more is
  answered ``503`` at once and closed, so a flood of idle sockets cannot take every file
  descriptor; the header timeout then clears them.

A connection's memory is thus bounded by what one request may send
(``GLASSLLM_MAX_BODY_BYTES``) and get back (``GLASSLLM_MAX_ANSWER_ELEMENTS``), for as long
as these timeouts allow. Tests: tests/service/test_slow_peers.py (real sockets, a real server);
figures: bench/slow_peers.py.
"""

from __future__ import annotations

import asyncio
import functools
from http import HTTPStatus
from typing import Any

import orjson
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings

PROTOCOL = "glassllm_service.server:GuardedHttpToolsProtocol"   # uvicorn.run(http=...)


@functools.cache
def _settings() -> Settings:
    """This worker process's settings (the CLI checked them before starting it)."""
    return Settings()


def _answer(err: ApiError) -> bytes:
    """A complete HTTP/1.1 answer with the sandbox's error envelope, then the close."""
    body = orjson.dumps(err.body())
    head = [f"HTTP/1.1 {err.status} {HTTPStatus(err.status).phrase}",
            "content-type: application/json", f"content-length: {len(body)}",
            "connection: close", *(f"{k}: {v}" for k, v in err.headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the timeouts and the connection bound above."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = _settings()
        self.header_timeout = settings.header_timeout_s
        self.body_timeout = settings.body_timeout_s
        self.send_timeout = settings.send_timeout_s
        self.max_connections = settings.max_connections
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._request_begun = False
        self._buffered = 0                 # the write buffer's size when last checked

    # -- the connection -------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            n = len(self.connections) - 1
            self.connections.discard(self)
            transport.write(_answer(ApiError(
                503, "too_many_connections", f"the sandbox already has {n} open connections,"
                f" at most {self.max_connections} (GLASSLLM_MAX_CONNECTIONS); retry shortly",
                headers={"retry-after": "1"})))
            transport.close()
            return
        self._header_timer = self.loop.call_later(self.header_timeout, self._header_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._header_timer, self._body_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = self._send_timer = None
        super().connection_lost(exc)

    # -- the request: headers, then body ---------------------------------------------
    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True
        if self._header_timer is None:          # the next request on a kept-alive connection
            self._header_timer = self.loop.call_later(self.header_timeout,
                                                      self._header_timed_out)

    def on_headers_complete(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()
        self._arm_body()

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._arm_body()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._request_begun = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _arm_body(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
        self._body_timer = self.loop.call_later(self.body_timeout, self._body_timed_out)

    def _header_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        if self._request_begun:                 # part of a request came: say why
            self.transport.write(_answer(ApiError(
                408, "request_timeout", "the request's headers did not arrive within"
                f" {self.header_timeout:g} s (GLASSLLM_HEADER_TIMEOUT_S)")))
        self.transport.close()

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        if self.flow.read_paused:               # the server is not reading: not the client's
            self._arm_body()
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            self.transport.write(_answer(ApiError(
                408, "request_timeout", f"no part of the request body came for"
                f" {self.body_timeout:g} s (GLASSLLM_BODY_TIMEOUT_S)", input="request body")))
        if cycle is not None:                   # the route reading the body sees a hang-up
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()

    # -- the answer: the client must read it -------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._buffered = self.transport.get_write_buffer_size()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.send_timeout, self._send_timed_out)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_timed_out(self) -> None:
        self._send_timer = None
        if self.transport.is_closing():
            return
        left = self.transport.get_write_buffer_size()
        if left < self._buffered:               # it reads, slowly: wait for more progress
            self._buffered = left
            self._send_timer = self.loop.call_later(self.send_timeout, self._send_timed_out)
            return
        # nothing read for the whole timeout: drop the buffered answer and the connection
        self.transport.abort()
