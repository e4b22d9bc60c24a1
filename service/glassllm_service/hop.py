"""No answer of the app carries a connection-specific header (RFC 9113 §8.2.2).

``Connection``, ``Keep-Alive``, ``Proxy-Connection``, ``Transfer-Encoding`` and ``Upgrade``
describe one hop, the connection they travel on; they belong to the server, which frames
the answer. HTTP/2 forbids them, and a message that carries one is malformed: a browser
on HTTP/2 (through a proxy that passes them on, or a server that speaks HTTP/2 itself)
drops the stream, and with it, often, every request sharing the connection.
sse-starlette sets ``Connection: keep-alive`` on every event stream, which on HTTP/1.1 is
the default anyway (and contradicted uvicorn's own ``connection: close`` when the client
asked to close, so the training stream said both).

This middleware, the outermost, takes them out of every answer the app sends, whatever
part of the app or a library set them, along with any header the ``Connection`` value
named (RFC 9110 §7.6.1). What the client sees on HTTP/1.1 besides is the server's:
uvicorn writes ``transfer-encoding: chunked`` for a body of unknown length (the event
stream) and ``connection: close`` when it will close the connection (the client asked,
HTTP/1.0, an error); over HTTP/2 it writes neither.
"""

from __future__ import annotations

from typing import Any

HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding",
                        b"upgrade"})


def without_hop_by_hop(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`headers` less the connection-specific ones and those ``Connection`` names."""
    named = {token.strip().lower() for name, value in headers if name.lower() == b"connection"
             for token in value.split(b",")}
    drop = HOP_BY_HOP | named
    return [(name, value) for name, value in headers if name.lower() not in drop]


class NoHopByHop:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_clean(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = message.get("headers", ())
                for name, _ in headers:          # most answers have none: look first
                    if name.lower() in HOP_BY_HOP:
                        message = {**message, "headers": without_hop_by_hop(list(headers))}
                        break
            await send(message)

        await self.app(scope, receive, send_clean)
