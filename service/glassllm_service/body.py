"""Limits enforced around every computation (SPEC H5): body size while reading, JSON depth
before parsing. The cap on concurrent computations is glassllm_service/admission.py."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import Request

from glassllm_service.admission import ClientGone
from glassllm_service.codec import json_depth
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings


async def read_body(request: Request, settings: Settings, op: str | None = None) -> bytes:
    """The request body, refused with 413 as soon as it passes the limit (never buffered whole).

    `op`: the registry op the path names, if any, so the refusal names it like every other.
    """
    limit = settings.max_body_bytes
    _check_declared_length(request, limit, op)
    # The ASGI messages themselves (what Starlette's Request.stream reads, without its
    # async generator): a small body is one message, returned as it came.
    chunks, size = [], 0
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            raise ClientGone("while sending its body")       # a 499 in the log, not a 500
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_big(limit, op)
        if not message.get("more_body", False):
            return b"".join((*chunks, chunk)) if chunks else chunk
        chunks.append(chunk)


def _check_declared_length(request: Request, limit: int, op: str | None) -> None:
    """413 at once for a Content-Length over the limit: the body is never read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_big(limit, op)


def _too_big(limit: int, op: str | None) -> ApiError:
    # No Connection: close (hop.py): the rest of an unread body is the server's to deal
    # with; uvicorn reads it and drops it (RFC 9112 §9.3 lets a server read it or close).
    return ApiError(413, "body_too_large", f"the request body exceeds {limit} bytes"
                    " (GLASSLLM_MAX_BODY_BYTES)", op=op, input="request body")


def check_answer(elements: int, settings: Settings, *, what: str, input: str | None,
                 op: str | None = None) -> None:
    """413 before any work when a request would return and hold more than
    `Settings.answer_limit` elements of arrays (`what` says which: "the answer",
    "cases[0..3] together" …); a slow reader holds its whole answer, and a batch or an
    opened expression multiplies one result's size."""
    limit = settings.answer_limit
    if elements > limit:
        raise ApiError(413, "too_large", f"{what} would return {elements} elements of arrays"
                       f" (values and gradients); the limit is {limit}"
                       " (GLASSLLM_MAX_ANSWER_ELEMENTS)", op=op, input=input)


def check_depth(body: bytes, settings: Settings, op: str | None = None) -> None:
    depth = json_depth(body)
    if depth > settings.max_json_depth:
        raise ApiError(422, "too_deep", f"JSON nesting depth {depth} exceeds"
                       f" {settings.max_json_depth} (GLASSLLM_MAX_JSON_DEPTH)", op=op,
                       input="request body")


async def read_json(request: Request, settings: Settings, op: str | None = None, *,
                    send: str = '{"inputs": {...}}', queued: bool = True) -> tuple[Any, bool]:
    """A POST body as JSON, under the limits: 415 unless JSON, 413 past the size, 422 when
    empty (``send`` is what the message says to send), too deep or not JSON.

    Returns the parsed body and `maybe_bools` (the body spells true / false somewhere: the
    exact path of `glassllm.sandbox.wire` is needed only then). `op` is named in every refusal.
    `queued`: the request will wait for a compute slot (see `read_json_then`).
    """
    return await read_json_then(request, settings, lambda parsed, maybe_bools: (
        parsed, maybe_bools), op=op, send=send, queued=queued)


async def read_json_then(request: Request, settings: Settings,
                         then: Callable[[Any, bool], Any], op: str | None = None, *,
                         send: str = '{"inputs": {...}}', queued: bool = True) -> Any:
    """`read_json`, then ``then(parsed, maybe_bools)`` (the request's prepare step) in the
    same step: for a large body both run in one worker thread, under one token of the
    decode limiter. The parsed body (Python lists, several times its bytes) thus never
    waits in a queue, so at most 2 × slots of them are alive however many clients send
    big bodies at once (a 512-client overload peaked at 785 MB when parsed bodies
    queued for the prepare step).

    `queued` (the default): the request goes on to wait for a compute slot
    (`glassllm_service.admission.run_admitted`), so when every slot is busy and the queue is full
    it is refused (503 ``queue_full``) before its body is read, as the queue would refuse
    it after. A route that takes no slot (starting a training run) passes False."""
    headers = request.headers
    ctype, *params = headers.get("content-type", "").lower().split(";")
    ctype = ctype.strip()
    if ctype != "application/json" and not ctype.endswith("+json"):
        raise ApiError(415, "unsupported_media_type", f"Content-Type must be application/json;"
                       f" got {ctype or 'none'!r}", op=op, input="Content-Type")
    if params:
        _check_charset(params, op)
    coding = headers.get("content-encoding")
    if coding is not None and coding.strip().lower() not in ("", "identity"):
        raise ApiError(415, "unsupported_media_type", f"Content-Encoding {coding[:40]!r} is not"
                       " accepted; send the body uncompressed", op=op, input="Content-Encoding",
                       headers={"Accept-Encoding": "identity"})
    admission = _admission(request) if queued else None
    if admission is not None:
        # every slot busy and the queue full: refused before the body is read, but a
        # declared length over the limit stays the permanent 413
        _check_declared_length(request, settings.max_body_bytes, op)
        admission.refuse_if_full()
    try:
        body = await read_body(request, settings, op=op)
    except ApiError:      # a hang-up or a stalled body mid-read: its chunks go back once idle
        _work_done(request)
        raise
    if not body.strip():
        raise ApiError(422, "invalid_request", f"the body is empty; send {send}", op=op,
                       input="request body")

    def parse_then() -> Any:
        return then(*_parse(body, settings, op))

    if len(body) > OFF_LOOP_BYTES:       # a 2.6 MB matmul body takes ~10 ms to decode
        try:
            return await _in_thread(request, parse_then)
        finally:       # refused or not, a big body's memory is given back once idle
            _work_done(request)
    return parse_then()


def _check_charset(params: list[str], op: str | None) -> None:
    """JSON text is UTF-8 (RFC 8259 §8.1): a declared charset of anything else is a 415, not
    a body read as if it were UTF-8."""
    for param in params:
        key, _, value = param.partition("=")
        value = value.strip().strip('"')
        if key.strip() == "charset" and value not in ("utf-8", "utf8"):
            raise ApiError(415, "unsupported_media_type", f"JSON must be UTF-8 (RFC 8259); got"
                           f" charset={value[:40]!r}", op=op, input="Content-Type")


def _admission(request: Request) -> Any:
    return getattr(getattr(request.scope.get("app"), "state", None), "admission", None)


def _work_done(request: Request) -> None:
    trim = getattr(_admission(request), "idle_trim", None)
    if trim is not None:
        trim.work_done()


# Bodies past this size are decoded (and their requests prepared) in a worker thread, so one big
# request does not stall every other request on the event loop; small ones stay inline
# (a thread hop costs more than decoding a few kB).
OFF_LOOP_BYTES = 64 * 1024


_BARE_NONFINITE = re.compile(rb"(?<![\w\"])-?(?:NaN|Infinity|inf|nan)(?![\w\"])")
_HUGE_NUMBER = re.compile(rb"\d{300}")


def _hint(body: bytes) -> str:
    """The rule behind the two refusals JSON's own message does not explain."""
    head = body[:1_000_000]
    if _BARE_NONFINITE.search(head):
        return ('; JSON has no NaN or Infinity: write them as the strings "NaN", "Infinity",'
                ' "-Infinity" (H3)')
    if _HUGE_NUMBER.search(head):
        return "; a number must fit a float64 (at most about 1.8e308)"
    return ""


def _parse(body: bytes, settings: Settings, op: str | None) -> tuple[Any, bool]:
    try:
        parsed = orjson.loads(body)   # orjson refuses nesting past 1024 on its own, safely
    except orjson.JSONDecodeError as exc:
        _check_depth_cheaply(body, settings, op)      # too deep is named before invalid
        raise ApiError(422, "invalid_json", f"the body is not valid JSON: {exc}{_hint(body)}",
                       op=op, input="request body") from None
    if len(body) > _SCAN_FREE and not _needs_text_scan(parsed, settings.max_json_depth):
        return parsed, False
    _check_depth_cheaply(body, settings, op)
    return parsed, b"true" in body or b"false" in body


def _check_depth_cheaply(body: bytes, settings: Settings, op: str | None) -> None:
    # Nesting needs an opening bracket per level: a body with no more [ and { than the
    # limit cannot be too deep, and two C-speed counts spare the scan.
    if body.count(b"[") + body.count(b"{") > settings.max_json_depth:
        check_depth(body, settings, op=op)


_SHORT, _SCALARS = 64, (str, int, float)
# Below this many bytes the two byte scans (bracket count, true / false) cost less than
# the walk of the parsed body that might spare them.
_SCAN_FREE = 4096


def _needs_text_scan(parsed: Any, limit: int) -> bool:
    """False when the parsed body holds only objects, strings, numbers and short flat lists
    of them (a binary array's shape, requires_grad): every array in binary form, none
    deeper than ``limit``. Then it cannot be too deep and no JSON list holds a bool, so the
    byte scans of a large body (depth, true / false) are skipped. True sends the body
    through those exact checks."""
    stack: list[tuple[Any, int]] = [(parsed, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > limit:
                return True
            stack.extend((value, depth + 1) for value in node.values())
        elif isinstance(node, list):
            if depth > limit or len(node) > _SHORT or not all(
                    type(item) in _SCALARS for item in node):       # a bool's type is bool
                return True
        elif node is True or node is False:
            return True
    return False


async def _in_thread(request: Request, fn: Callable, *args: Any) -> Any:
    """In a worker thread, at most 2 × compute slots at once: a decoded body is ~4x its
    bytes in Python objects, so an overload of big bodies must not decode 40 at a time."""
    app = request.scope.get("app")
    state = app.state if app is not None else None
    limiter = getattr(state, "decode_limiter", None)
    if limiter is None:
        slots = state.admission.capacity if state is not None and hasattr(state, "admission") \
            else 1
        limiter = anyio.CapacityLimiter(2 * slots)
        if state is not None:
            state.decode_limiter = limiter
    return await anyio.to_thread.run_sync(functools.partial(fn, *args), limiter=limiter)
