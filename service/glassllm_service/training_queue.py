"""The training queue of one worker process: runs wait for their turn instead of being
refused, one run per student, with a position and an estimate they can watch.

    ticket = queue.enter(owner, steps, planned)    # 503 only when the queue is full
    async for event in queue.wait_turn(ticket, shutdown):
        yield event                                # "queued", then "position" events
    ...                                            # the run's turn: start its process
    queue.leave(ticket)                            # always (a finally): the next one goes

- **Runs at once.** At most `capacity` runs train at once in this worker
  (``GLASSLLM_MAX_TRAINING_RUNS``, default one per CPU of the worker), each a child
  process. Others wait, first come first served, at most `max_waiting` of them
  (``GLASSLLM_MAX_TRAINING_QUEUE``); only a newcomer that finds the queue full is refused,
  with 503 and a Retry-After of the time until a place is expected to free.
- **One run per student.** A run belongs to its owner (`run_owner`: a student's own
  token, else ``X-Client-ID``, else the address). A second start by the same owner replaces
  the first: a waiting run hands its place in the line to the new one, a running one is
  stopped (its stream ends with an ``error`` of code ``replaced``) and the new run waits
  at the back, so restarting never jumps the line.
- **Stateless.** The queue lives in this worker's memory only and dies with it: no store,
  no route of its own. A run's queue events ride its own event stream before ``start``, so
  positions count the runs of this worker process (one per replica as shipped), not of
  the class.
- **The estimate** is a small simulation: each running run ends after its remaining steps
  at the pace its step events show, each waiting run takes the slot that frees first and
  holds it for its planned seconds (`planned_seconds`) times this worker's pace (how much
  slower or faster than planned its finished runs went; 1 until one finished).

Everything runs on the worker's event loop (no locks).
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from glassllm_service import metrics
from glassllm_service.http_errors import ApiError

# A run's seconds on one core of this project's machine, from its settings alone, measured
# as CPU time with one BLAS thread (bench/train_queue.py prints the model against runs):
# the child's start, then per step a fixed cost (Python's share of ~40 small ops) plus its
# matmul work, where every weight meets each of the B·n positions once and the attention
# scores add L·n·d per position (the default model: 15 ms a step), plus one sample of 48
# bytes every `every` steps (the default model: 28 ms).
OVERHEAD_S = 0.3            # the interpreter, NumPy, the model, the corpus
STEP_S = 6e-4               # a step of the tiniest model
SECONDS_PER_UNIT = 2.0e-10  # per weight·position of a step
SAMPLE_S = 0.012            # a sample of the tiniest model
SAMPLE_S_PER_WEIGHT = 1.2e-7
LEARN = 0.3                 # weight of the newest finished run in the learned pace
REFRESH_S = 2.0             # a waiting run hears its estimate at least this often
SCHEDULE_TTL_S = 0.25       # the schedule is recomputed at most this often between changes


def planned_seconds(config: dict[str, int], steps: int, batch: int, every: int,
                    parameters: int) -> float:
    """A run's seconds on one core of this project's machine (the comment above), before
    it starts: the queue's unit of work. Each worker learns its own pace against it."""
    n, d, layers = config["max_seq_len"], config["d_model"], config["n_layers"]
    per_step = STEP_S + SECONDS_PER_UNIT * batch * n * (parameters + layers * n * d)
    samples = math.ceil(steps / every)
    return OVERHEAD_S + steps * per_step + samples * (SAMPLE_S
                                                      + SAMPLE_S_PER_WEIGHT * parameters)


class Replaced(Exception):
    """The run's owner started another run: this one gives way."""


@dataclass(eq=False)
class Ticket:
    """One run, waiting or running."""

    owner: str
    steps: int
    planned: float                      # `planned_seconds` of the run
    granted: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop()
                                    .create_future())
    replaced: asyncio.Future = field(default_factory=lambda: asyncio.get_running_loop()
                                     .create_future())
    started: float | None = None        # time.monotonic() when its turn came
    first_step: float | None = None     # when its first step event arrived
    steps_done: int = 0
    left: bool = False

    def step_seen(self) -> None:
        """A step event of this run passed by (the pace of its remaining steps)."""
        self.steps_done += 1
        if self.first_step is None:
            self.first_step = time.monotonic()


class TrainingQueue:
    """The runs of one worker process; see the module docstring.

    Args:
        capacity: runs at once (0: the sandbox trains nothing; every start is refused).
        max_waiting: runs waiting (≥ 0) before a newcomer is refused with 503.
    """

    def __init__(self, capacity: int, max_waiting: int) -> None:
        self.capacity, self.max_waiting = capacity, max_waiting
        self.running: list[Ticket] = []
        self.waiting: list[Ticket] = []
        self.owners: dict[str, Ticket] = {}
        self.pace = 1.0          # measured seconds / planned seconds, learned
        self._changed = asyncio.Event()
        self._schedule: dict[Ticket, float] = {}
        self._scheduled_at = -math.inf

    # -- the interface --------------------------------------------------------------
    def enter(self, owner: str, steps: int, planned: float) -> Ticket:
        """A new run of `owner`, waiting or (a place free, no one waiting) granted at once.

        Raises: `ApiError` 403 ``training_off`` (no runs at all: retrying cannot help),
        503 ``training_queue_full`` (with Retry-After) when every place is taken.
        """
        if self.capacity == 0:
            raise ApiError(403, "training_off", "training is turned off on this sandbox (its"
                           " operator set GLASSLLM_MAX_TRAINING_RUNS=0)")
        old = self.owners.get(owner)
        # a replacing run takes its old run's place in line, or (its old run running)
        # waits at the back while that one stops: one over the bound at most per slot
        if old is None and len(self.running) >= self.capacity \
                and len(self.waiting) >= self.max_waiting:
            raise self._full()
        ticket = Ticket(owner, steps, planned)
        self.owners[owner] = ticket
        if old is not None and old in self.waiting:       # the new run keeps the old place
            self.waiting[self.waiting.index(old)] = ticket
            old.left = True
        else:
            self.waiting.append(ticket)
            metrics.training_runs("waiting", +1)
        if old is not None:
            old.replaced.set_result(None)
            metrics.refused("training_replaced")
        self._dispatch()
        self._moved()
        return ticket

    def leave(self, ticket: Ticket) -> None:
        """`ticket` is done with (ended, stopped, replaced, its client gone): out of the
        line or its slot, and the next run gets its turn. Safe to call more than once."""
        if ticket.left and ticket not in self.running:
            return
        ticket.left = True
        if ticket in self.waiting:
            self.waiting.remove(ticket)
            metrics.training_runs("waiting", -1)
        elif ticket in self.running:
            self.running.remove(ticket)
            metrics.training_runs("running", -1)
            self._learn(ticket)
        if self.owners.get(ticket.owner) is ticket:
            del self.owners[ticket.owner]
        if not ticket.granted.done():
            ticket.granted.cancel()
        self._dispatch()
        self._moved()

    async def wait_turn(self, ticket: Ticket, shutdown: Any = None) -> AsyncIterator[dict]:
        """Until `ticket`'s turn: a ``queued`` event at once (position 0 when its turn
        came at once: it starts now), then a ``position`` event whenever its place in line
        changes, and at least every `REFRESH_S` (the estimate).

        Returns when the turn came, or when `shutdown` (an event with ``wait()``) was set:
        the caller tells them apart by ``ticket.granted``.

        Raises: `Replaced` when its owner started another run.
        """
        stop = asyncio.ensure_future(shutdown.wait()) if shutdown is not None else None
        try:
            name, last, sent = "queued", None, -math.inf
            while True:
                if ticket.replaced.done():
                    raise Replaced
                if (ticket.granted.done() and sent > -math.inf) \
                        or (stop is not None and stop.done()):
                    return                   # its turn, and it was told at least once
                position, wait_s = self.place(ticket)
                now = time.monotonic()
                if position != last or now - sent >= REFRESH_S:
                    yield {"event": name, "position": position, "waiting": len(self.waiting),
                           "wait_s": round(wait_s, 1),
                           "run_s": round(self._seconds(ticket), 1),
                           "runs_at_once": self.capacity, "time": time.time()}
                    name, last, sent = "position", position, now
                    continue                 # the line may have moved while it was sent
                moved = asyncio.ensure_future(self._changed.wait())
                try:
                    await asyncio.wait({ticket.granted, ticket.replaced, moved}
                                       | ({stop} if stop is not None else set()),
                                       timeout=max(REFRESH_S - (time.monotonic() - sent), 0.05),
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    moved.cancel()
        finally:
            if stop is not None:
                stop.cancel()

    async def stopped(self, ticket: Ticket, shutdown: Any = None) -> None:
        """Return when the server shuts down or `ticket`'s owner replaced it: the ``stop``
        that ends a running run's process (`glassllm_service.training_runner.events`)."""
        waits: set[Any] = {ticket.replaced}
        stop = asyncio.ensure_future(shutdown.wait()) if shutdown is not None else None
        if stop is not None:
            waits.add(stop)
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if stop is not None:
                stop.cancel()

    def place(self, ticket: Ticket) -> tuple[int, float]:
        """`ticket`'s position in line (1: next) and the seconds until its turn, estimated."""
        schedule = self.schedule()
        position = self.waiting.index(ticket) + 1 if ticket in self.waiting else 0
        return position, schedule.get(ticket, 0.0)

    def retry_after(self) -> int:
        """Seconds until a place in line is expected to free: when the first waiting run
        (or, with no one waiting, the first running one) is expected to start (end)."""
        if self.waiting:
            soonest = self.schedule().get(self.waiting[0], 1.0)
        else:
            soonest = min((self._remaining(t, time.monotonic()) for t in self.running),
                          default=1.0)
        return max(1, min(300, math.ceil(soonest)))

    def schedule(self) -> dict[Ticket, float]:
        """Seconds from now until each waiting run's turn: each takes the slot that frees
        first (cached between changes for `SCHEDULE_TTL_S`)."""
        now = time.monotonic()
        if now - self._scheduled_at < SCHEDULE_TTL_S:
            return self._schedule
        free = [self._remaining(t, now) for t in self.running]
        free += [0.0] * max(self.capacity - len(free), 0)
        heapq.heapify(free)
        out: dict[Ticket, float] = {}
        for t in self.waiting:
            start = heapq.heappop(free) if free else 0.0
            out[t] = start
            heapq.heappush(free, start + self._seconds(t))
        self._schedule, self._scheduled_at = out, now
        return out

    # -- inside ----------------------------------------------------------------------
    def _full(self) -> ApiError:
        metrics.refused("training_queue_full")
        retry = self.retry_after()
        return ApiError(503, "training_queue_full", "Many students are training on this"
                        f" server right now and the waiting line is full ({len(self.waiting)}"
                        " runs), so your run did not start. It can start once a place"
                        f" frees, in about {retry} s: try again then.",
                        headers={"Retry-After": str(retry)})

    def _dispatch(self) -> None:
        while self.waiting and len(self.running) < self.capacity:
            ticket = self.waiting.pop(0)
            self.running.append(ticket)
            ticket.started = time.monotonic()
            ticket.granted.set_result(None)
            metrics.training_runs("waiting", -1)
            metrics.training_runs("running", +1)

    def _moved(self) -> None:
        """Wake every waiting run: its place or its estimate changed."""
        self._scheduled_at = -math.inf
        self._changed.set()
        self._changed = asyncio.Event()

    def _seconds(self, ticket: Ticket) -> float:
        return ticket.planned * self.pace

    def _remaining(self, ticket: Ticket, now: float) -> float:
        """A running run's seconds left: its plan at first, its own pace once a tenth of
        its steps (at least 5) went by, the first steps' samples averaged in."""
        if ticket.first_step is not None and ticket.steps_done >= max(5, ticket.steps // 10):
            pace = (now - ticket.first_step) / (ticket.steps_done - 1)
            return max(ticket.steps - ticket.steps_done, 0) * pace
        return max(self._seconds(ticket) - (now - (ticket.started or now)), 0.1)

    def _learn(self, ticket: Ticket) -> None:
        """A run that did all its steps tells this worker's pace (measured / planned)."""
        if ticket.started is None or ticket.steps_done < ticket.steps or ticket.planned <= 0:
            return
        measured = (time.monotonic() - ticket.started) / ticket.planned
        measured = min(max(measured, self.pace / 10), self.pace * 10)
        self.pace += LEARN * (measured - self.pace)


def run_owner(request: Any, shared_token: bool) -> str:
    """Whose run: the student's own Bearer token (hashed; not when `shared_token`, the
    sandbox-wide ``GLASSLLM_API_TOKEN`` every student sends alike), else ``X-Client-ID``
    (≤ 64 characters; the page sends one per tab), else the address: the last
    ``X-Forwarded-For`` hop when a proxy added one (behind nginx every peer is nginx),
    else the peer's. It only keys the one-run-per-student rule; it grants no right."""
    scheme, _, token = request.headers.get("authorization", "").strip().partition(" ")
    token = token.strip()
    if token and scheme.lower() == "bearer" and not shared_token:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:32]
    given = request.headers.get("x-client-id", "").strip()
    if given:
        return "id:" + given[:64]
    forwarded = request.headers.get("x-forwarded-for", "").rsplit(",", 1)[-1].strip()
    if forwarded:
        return "ip:" + forwarded[:64]
    return "ip:" + (request.client.host if request.client else "?")


def from_settings(settings: Any) -> TrainingQueue:
    """The worker's training queue (its runs at once and its waiting line)."""
    queue = TrainingQueue(settings.training_runs, settings.training_queue)
    metrics.training_capacity(queue.capacity)
    return queue
