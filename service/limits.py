"""Limits enforced around every computation (SPEC H5): body size while reading, JSON depth
before parsing, and a cap on concurrent computations (503 + Retry-After)."""

from __future__ import annotations

import threading

from starlette.requests import Request

from service.codec import json_depth
from service.errors import ApiError
from service.settings import Settings


async def read_body(request: Request, settings: Settings, op: str | None = None) -> bytes:
    """The request body, refused with 413 as soon as it passes the limit (never buffered whole).

    `op`: the registry op the path names, if any, so the refusal names it like every other.
    """
    limit = settings.max_body_bytes
    too_big = ApiError(413, "body_too_large", f"the request body exceeds {limit} bytes"
                       " (GLASSLLM_MAX_BODY_BYTES)", op=op, input="request body",
                       headers={"Connection": "close"})
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def check_depth(body: bytes, settings: Settings, op: str | None = None) -> None:
    depth = json_depth(body)
    if depth > settings.max_json_depth:
        raise ApiError(422, "too_deep", f"JSON nesting depth {depth} exceeds"
                       f" {settings.max_json_depth} (GLASSLLM_MAX_JSON_DEPTH)", op=op,
                       input="request body")


class ComputeSlots:
    """At most `n` computations at once; a request that finds none free is told to retry."""

    def __init__(self, n: int, retry_after: int):
        self._sem = threading.BoundedSemaphore(n)
        self.capacity, self.retry_after = n, retry_after
        self.busy = 0

    def __enter__(self) -> ComputeSlots:
        if not self._sem.acquire(blocking=False):
            raise ApiError(503, "busy", f"all {self.capacity} compute slots are busy; retry"
                           " shortly (GLASSLLM_MAX_CONCURRENCY)",
                           headers={"Retry-After": str(self.retry_after)})
        self.busy += 1
        return self

    def __exit__(self, *exc) -> None:
        self.busy -= 1
        self._sem.release()
