"""How a computing route answers, the same for every kind of request (H5):

1. read the body under the limits and prepare the request's work in one step
   (`glassllm_service.body.read_json_then`: every check, no compute; a queued request
   holds its prepared work, never the JSON lists);
2. wait for a compute slot in the lane of the work's planned ``cost``
   (`glassllm_service.admission.run_admitted`);
3. run it (``answer()``: the response's bytes) and send them.

A kind of request (`glassllm_service.requests`) gives the ``prepare(body, maybe_bools,
settings)`` that returns its `Work`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from glassllm_service.admission import run_admitted
from glassllm_service.body import read_json, read_json_then
from glassllm_service.http_errors import ApiError
from glassllm_service.settings import Settings


class Work(Protocol):
    """A request past every check, not yet computed."""

    cost: Any
    """Planned (elements, multiply-adds), or their sum: the admission lane."""

    def answer(self) -> bytes:
        """The computation and the response's bytes, inside a compute slot."""


async def answer(request: Request, settings: Settings,
                 prepare: Callable[[Any, bool, Settings], Work], *, send: str,
                 op: str | None = None, prepare_in_thread: bool = False) -> Response:
    """The response to one computing request: read and prepare, wait for a slot, run.

    `send`: what an empty body is told to send; `op`: the op the path names, named in
    every refusal (the queue's 503s too); `prepare_in_thread`: the prepare step is work
    itself (decoding a model's weights), so it runs in a worker thread whatever the size
    of the body."""
    try:
        if prepare_in_thread:
            body, maybe_bools = await read_json(request, settings, op=op, send=send)
            work = await run_in_threadpool(prepare, body, maybe_bools, settings)
        else:
            work = await read_json_then(
                request, settings, lambda body, maybe_bools: prepare(body, maybe_bools, settings),
                op=op, send=send)
        out = await run_admitted(request, work.cost, work.answer)
    except ApiError as exc:
        if op is not None and exc.op is None:
            exc.op = op
        raise
    return Response(out, media_type="application/json")
