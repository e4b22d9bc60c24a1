"""Admission: a request waits for a compute slot in a bounded, fair queue (H5); a training
run waits in the training queue instead (`glassllm_service.training_queue`).

    work = op_call.prepare(...)           # every check, no work: its cost is planned
    out = await run_admitted(request, work.cost, work.answer)

- **Slots.** At most `capacity` computations run at once in this worker process
  (``GLASSLLM_MAX_CONCURRENCY``, default the CPUs / workers). A request that finds none
  free waits; it is refused with ``503`` and ``Retry-After`` only when the queue already
  holds ``GLASSLLM_MAX_QUEUE`` requests, or when it waited ``GLASSLLM_QUEUE_TIMEOUT_S``.
- **Two lanes by planned cost.** A request whose cost (elements + multiply-adds of the
  library's ``Prepared.cost``, known from its shape plan before any work) exceeds
  ``GLASSLLM_LARGE_COST`` is *large*. Large requests hold at most ``capacity - 1``
  slots (1 when there is a single slot), so with two slots or more one is always there
  for small work; when a slot frees and both lanes wait, the lanes take turns (the one
  not served last goes first), so a burst of (256, 256) matmuls cannot make a (4, 8)
  softmax wait behind more than one of them, and a stream of small requests cannot
  starve the large ones either.
- **Fair between clients.** Each lane keeps one FIFO per client key and serves the
  clients round-robin: a grader's loop of 200 requests gets one turn, then the student
  who sent one request gets theirs.
- **Hang-ups.** While queued, the request's ASGI ``receive`` is watched; a client that
  disconnects leaves the queue at once and its work never runs (`ClientGone`).

Everything runs on the worker's event loop (no locks): `slot` is entered and left there.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from glassllm_service import metrics
from glassllm_service.http_errors import ApiError
from glassllm_service.memory import IdleTrim

SMALL, LARGE = "small", "large"
Cost = int | tuple[int, int]


def weight(cost: Cost) -> int:
    """One number to compare with ``GLASSLLM_LARGE_COST``: elements + multiply-adds."""
    return cost if isinstance(cost, int) else sum(cost)


class ClientGone(ApiError):
    """The client hung up while its request waited for a slot; nothing was computed.
    Logged as 499 (nginx's "client closed request"); no one reads the answer."""

    def __init__(self, when: str = "while its request waited for a compute slot") -> None:
        super().__init__(499, "client_closed_request", f"the client disconnected {when};"
                         " nothing was computed")


@dataclass(eq=False)
class _Waiter:
    lane: str
    client: str
    granted: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop()
                                    .create_future())


class _Lane:
    """Per-client FIFOs served round-robin (the OrderedDict's order is the turn order)."""

    def __init__(self) -> None:
        self.queues: OrderedDict[str, deque[_Waiter]] = OrderedDict()
        self.waiting = 0

    def push(self, w: _Waiter) -> None:
        self.queues.setdefault(w.client, deque()).append(w)
        self.waiting += 1

    def pop(self) -> _Waiter:
        client, queue = next(iter(self.queues.items()))
        w = queue.popleft()
        del self.queues[client]
        if queue:                                   # back of the line for its next request
            self.queues[client] = queue
        self.waiting -= 1
        return w

    def remove(self, w: _Waiter) -> None:
        queue = self.queues.get(w.client)
        if queue is not None and w in queue:
            queue.remove(w)
            self.waiting -= 1
            if not queue:
                del self.queues[w.client]


class Admission:
    """The slots and the queue of one worker process; see the module docstring.

    Args:
        capacity: compute slots (≥ 1).
        max_queue: waiting requests (≥ 0) before a newcomer is refused at once.
        timeout_s: longest wait for a slot before 503.
        large_cost: planned cost above which a request is large.
        retry_after: the Retry-After (seconds) of every 503.
        on_release: called on the event loop each time a computation gives its slot back
            (the idle memory trim: glassllm_service/memory.py).
    """

    def __init__(self, capacity: int, max_queue: int, timeout_s: float, large_cost: int,
                 retry_after: int, on_release: Any = None) -> None:
        self.on_release = on_release
        self.idle_trim: IdleTrim | None = None
        self.capacity, self.max_queue, self.timeout_s = capacity, max_queue, timeout_s
        self.large_cost, self.retry_after = large_cost, retry_after
        self.large_capacity = max(1, capacity - 1)
        self.busy = {SMALL: 0, LARGE: 0}
        self.lanes = {SMALL: _Lane(), LARGE: _Lane()}
        self.last_lane = LARGE                   # the lane served last: the other goes first
        metrics.slots_capacity(capacity)

    # -- what /readyz and the tests read ---------------------------------------------
    @property
    def running(self) -> int:
        return self.busy[SMALL] + self.busy[LARGE]

    @property
    def waiting(self) -> int:
        return self.lanes[SMALL].waiting + self.lanes[LARGE].waiting

    def lane_of(self, cost: Cost) -> str:
        return LARGE if weight(cost) > self.large_cost else SMALL

    # -- the interface --------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def slot(self, *, cost: Cost, client: str, request: Any = None) -> AsyncIterator[None]:
        """Hold one compute slot for the body of the ``async with``.

        `cost`: the request's planned ``(elements, multiply-adds)`` (a `Prepared.cost` of
        `glassllm.sandbox.registry` or `glassllm.sandbox.expr`), or their sum.

        Raises: `ApiError` 503 (``queue_full`` / ``queue_timeout``) with Retry-After;
        `ClientGone` when the client disconnected while waiting.
        """
        lane = self.lane_of(cost)
        await self._acquire(lane, client, request)
        try:
            yield
        finally:
            self.release(lane)

    def take_free(self, cost: Cost) -> str | None:
        """The common case without the queue: when `cost`'s lane has a free slot and no
        one waits in it, take the slot and return the lane (give it back with `release`);
        else None, and the caller waits in `slot`. The same grant `slot` would make."""
        lane = self.lane_of(cost)
        if not (self._free(lane) and not self.lanes[lane].waiting):
            return None
        self._grant(lane)
        metrics.slot_waited(lane, 0.0)
        return lane

    def refuse_if_full(self) -> None:
        """Before a request's body is read: when every slot is busy and the queue is full,
        `slot` would refuse it once its body was read, decoded and planned, so refuse it now
        (the same 503 ``queue_full``). Under an overload this keeps refused requests from
        reading and decoding megabytes each (RSS after an overload).

        Raises: `ApiError` 503 ``queue_full`` with Retry-After.
        """
        if self.waiting >= self.max_queue and self.running >= self.capacity:
            raise self._queue_full()

    def _queue_full(self) -> ApiError:
        metrics.refused("queue_full")
        n = self.waiting
        why = (f"{n} request{' is' if n == 1 else 's are'} already waiting for a compute slot"
               " (GLASSLLM_MAX_QUEUE)" if self.max_queue else "every compute slot is busy"
               " and waiting is off (GLASSLLM_MAX_QUEUE=0)")
        return ApiError(503, "queue_full", f"the sandbox is busy: {why}; retry shortly",
                        headers=self._retry_after())

    def release(self, lane: str) -> None:
        """Give a slot of `lane` back: the next waiter (if any) gets it."""
        self.busy[lane] -= 1
        metrics.slot_released(lane)
        self._dispatch()
        if self.on_release is not None:
            self.on_release()

    async def _acquire(self, lane: str, client: str, request: Any) -> None:
        t0 = time.perf_counter()
        if self._free(lane) and not self.lanes[lane].waiting:
            self._grant(lane)
            metrics.slot_waited(lane, 0.0)
            return
        if self.waiting >= self.max_queue:
            raise self._queue_full()
        w = _Waiter(lane, client)
        self.lanes[lane].push(w)
        metrics.queue_depth(lane, +1)
        self._dispatch()                         # a slot may be free for this lane's turn
        hangup = asyncio.ensure_future(_disconnected(request)) if request is not None else None
        try:
            waits = {w.granted} | ({hangup} if hangup else set())
            await asyncio.wait(waits, timeout=self.timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self._leave(w)
            raise
        finally:
            if hangup is not None:
                hangup.cancel()
        if w.granted.done():
            metrics.slot_waited(lane, time.perf_counter() - t0)
            return
        self._leave(w)
        if hangup is not None and hangup.done() and not hangup.cancelled():
            metrics.refused("client_gone")
            raise ClientGone()
        metrics.refused("queue_timeout")
        raise ApiError(503, "queue_timeout", f"the sandbox is busy: no compute slot came free"
                       f" within {self.timeout_s:g} s (GLASSLLM_QUEUE_TIMEOUT_S); retry"
                       " shortly", headers=self._retry_after())

    def _leave(self, w: _Waiter) -> None:
        """Out of the queue; a slot granted in the meantime goes to the next in line."""
        if w.granted.done():
            self.busy[w.lane] -= 1
            metrics.slot_released(w.lane)
        else:
            self.lanes[w.lane].remove(w)
            metrics.queue_depth(w.lane, -1)
            w.granted.cancel()
        self._dispatch()

    def _free(self, lane: str) -> bool:
        if self.running >= self.capacity:
            return False
        return lane == SMALL or self.busy[LARGE] < self.large_capacity

    def _grant(self, lane: str) -> None:
        self.busy[lane] += 1
        self.last_lane = lane
        metrics.slot_taken(lane)

    def _dispatch(self) -> None:
        """Give free slots to waiters; when both lanes may take one, the lane not served
        last goes first (large only while it holds fewer than capacity - 1 slots)."""
        if not (self.lanes[SMALL].waiting or self.lanes[LARGE].waiting):
            return                                   # the common case: an empty queue
        while True:
            order = (LARGE, SMALL) if self.last_lane == SMALL else (SMALL, LARGE)
            lane = next((ln for ln in order
                         if self.lanes[ln].waiting and self._free(ln)), None)
            if lane is None:
                return
            w = self.lanes[lane].pop()
            metrics.queue_depth(lane, -1)
            self._grant(lane)
            w.granted.set_result(None)

    def _retry_after(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


async def _disconnected(request: Any) -> None:
    """Return when the client disconnects (the body was read already: the next ASGI
    message is ``http.disconnect``)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def client_key(request: Any) -> str:
    """Whose turn: the ``X-Client-ID`` header (≤ 64 characters), else the peer address.

    Behind a proxy every student has the proxy's address; the page sends a per-tab
    X-Client-ID. The key only orders the queue: it grants no right (auth.py does that).
    """
    given = request.headers.get("x-client-id", "").strip()
    if given:
        return "id:" + given[:64]
    return "ip:" + (request.client.host if request.client else "?")


# A computation whose planned cost (elements + multiply-adds) is at most this runs on the
# event loop itself, inside its slot: a (4, 8) softmax takes microseconds, less than the
# hop to a worker thread and back; ~20k is well under a millisecond of NumPy work, so the
# loop is never held for long.
INLINE_COST = 20_000


async def run_admitted(request: Any, cost: Cost, fn: Any, *args: Any) -> Any:
    """``fn(*args)`` once `request` holds a compute slot for `cost`: the one way every
    computing route (ops, eval, batch, check, model/attention) runs its work. In a worker
    thread, unless the planned cost is at most `INLINE_COST`: then on the event loop, still
    in its slot, its lane and its client's turn (the queue and its fairness are the same).

    Raises what `Admission.slot` raises (503 queue_full / queue_timeout, a hang-up)."""
    admission, inline = request.app.state.admission, weight(cost) <= INLINE_COST
    lane = admission.take_free(cost)
    if lane is not None:      # a slot free and no one waiting in its lane: no queue at all
        try:
            return fn(*args) if inline else await run_in_threadpool(fn, *args)
        finally:
            admission.release(lane)
    async with admission.slot(cost=cost, client=client_key(request), request=request):
        if inline:
            return fn(*args)  # tiny: the thread hop would cost more than the work
        return await run_in_threadpool(fn, *args)


def from_settings(settings: Any) -> Admission:
    """The worker's admission, with the idle memory trim after each burst (memory.py)."""
    adm = Admission(settings.compute_slots, settings.max_queue, settings.queue_timeout_s,
                    settings.large_cost, settings.retry_after_seconds)
    adm.idle_trim = IdleTrim(busy=lambda: bool(adm.running or adm.waiting))
    adm.on_release = adm.idle_trim.work_done
    return adm

