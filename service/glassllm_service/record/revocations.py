"""The revoked tokens as one worker knows them: a set read from the record, refreshed.

A token carries its student's generation from when it was issued (`tokens`); revoking or
forgetting a student bumps the generation in the database (`store`). Each worker keeps, in
memory, the generations that moved from 0 — every student or instructor ever revoked or
forgotten — read by one query over the partial index ``students_revoked`` (migration
0004) at most once per ``GLASSLLM_REVOCATION_REFRESH_S``. A request is checked against that
memory, never the database: a token dies in every worker within the interval of its
revocation, and the database sees one small query per worker and interval, however many
requests come.

- A token is **revoked** when its generation is below the one read. One above it (issued
  after a revocation this worker has not read yet) is accepted: it is newer than the set.
- The set is **stale** when no read succeeded within the interval: the database did not
  answer. The set keeps what it last read; what to do then is the caller's
  (`glassllm_service.record.access`: homework goes on with it, a graded session refuses
  students). A failed read is tried again after `RETRY_S`, not on every request, and is
  logged once when the database stops answering and once when it answers again.

The set is read lazily: the first request to find it older than the interval reads it
(in a worker thread, never on the event loop), and requests that arrive meanwhile wait
for that read rather than making their own.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy import Engine, text

from glassllm_service.record.database import describe, unavailable_errors
from glassllm_service.record.tokens import Claims

# the students_revoked index's condition, word for word: the planner uses the index
REVOKED = text("SELECT student, generation FROM students WHERE course = :c AND"
               " generation > 0")
RETRY_S = 2.0       # a failed read is tried again after this long (the database is down)
WAIT_S = 5.0        # longest a request waits for another request's read

log = logging.getLogger("glassllm.service")


def read_revoked(engine: Engine, course: str) -> dict[str, int]:
    """student id → generation, for every generation above 0 of `course` (one query)."""
    with engine.connect() as conn:
        rows = conn.execute(REVOKED, {"c": course}).all()
        conn.rollback()
    return {r[0]: int(r[1]) for r in rows}


class Revocations:
    """One worker's set of revoked tokens (module docstring). `interval`: seconds a read
    stays fresh; `graded`: only for the wording of the log line."""

    def __init__(self, engine: Engine, course: str, interval: float, *, graded: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.engine, self.course, self.interval, self.graded = engine, course, interval, graded
        self._clock = clock
        self._known: dict[str, int] = {}
        self._read_at: float | None = None       # the clock at the last read that worked
        self._failed_at: float | None = None     # the clock at the last read that failed
        self._lock = threading.Lock()
        self.reads = 0                           # reads that worked (the bench counts them)

    def fresh(self) -> bool:
        """Whether the set was read within the interval."""
        return self._read_at is not None and self._clock() - self._read_at < self.interval

    def settled(self) -> bool:
        """Whether no read is due now: the set is fresh, or the last read failed less than
        `RETRY_S` ago."""
        if self.fresh():
            return True
        return self._failed_at is not None and self._clock() - self._failed_at < RETRY_S

    def refresh(self, force: bool = False) -> None:
        """Read the set if it is still due once this thread's turn comes (blocking: call it
        in a worker thread); `force`: read it whether due or not. A wait past `WAIT_S` for
        another thread's read returns with the set as it is."""
        if not self._lock.acquire(timeout=WAIT_S):
            return
        try:
            if self.settled() and not force:
                return
            try:
                known = read_revoked(self.engine, self.course)
            except unavailable_errors() as exc:
                if self._failed_at is None:            # the first failure since it answered
                    self._say_down(exc)
                self._failed_at = self._clock()
                return
            if self._failed_at is not None:
                log.warning("record database answers again: the revoked tokens are read"
                            " (%d)", len(known))
            self._known, self._read_at, self._failed_at = known, self._clock(), None
            self.reads += 1
        finally:
            self._lock.release()

    def _say_down(self, exc: BaseException) -> None:
        age = "never read" if self._read_at is None else \
            f"last read {self._clock() - self._read_at:.0f} s ago"
        then = ("students' requests are refused (503 record_unavailable) until it answers;"
                " instructors' go on with the last set") if self.graded else \
            "requests go on with the last set until it answers"
        log.warning("record database unavailable: the revoked tokens cannot be read (%s);"
                    " %s, %d revoked; %s", describe(exc), age, len(self._known), then)

    def verdict(self, claims: Claims) -> str:
        """``revoked`` (by the set as last read), ``stale`` (not revoked by it, but it is
        older than the interval) or ``ok``."""
        if claims.gen < self._known.get(claims.sub, 0):
            return "revoked"
        return "ok" if self.fresh() else "stale"
