"""Memory back to the OS after a burst (RSS after a class's load stays near the
warmed state).

A burst of large requests (a queue of (256, 256) matmuls, an overload of 512 clients)
leaves the allocator holding the freed bodies and arrays: NumPy's buffers sit in glibc's
heap (kept on purpose for reuse: glassllm/sandbox/runtime.py) and Python keeps its small-object
arenas. `IdleTrim` waits until this worker's computations have been idle for
``delay_s`` (no slot released in that time, none running or queued), then calls
`glassllm.sandbox.runtime.trim_free_memory` once, in a thread, off the event loop. Under steady
load it never fires (every finished computation pushes it back), so the hot path keeps
its reused buffers; after the burst the process returns to its working set.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable
from typing import Any

from glassllm.sandbox.runtime import trim_free_memory


def collect_and_trim() -> bool:
    """A full garbage collection, then glibc's trim: a refused or failed request's
    exception holds its frames (and their bodies and arrays) in a reference cycle that
    only the collector frees, and pymalloc returns an arena to the OS only once every
    object in it is gone."""
    gc.collect()
    return trim_free_memory()


class IdleTrim:
    """Call ``trim`` once the worker has been idle for ``delay_s`` after some work.

    Args:
        busy: returns True while any computation runs or waits (the admission's state).
        delay_s: seconds without a finished computation before the trim.
        trim: what to call, in a worker thread (default: glibc's ``malloc_trim(0)``).
    """

    def __init__(self, busy: Callable[[], bool], delay_s: float = 2.0,
                 trim: Callable[[], Any] = collect_and_trim) -> None:
        self.busy, self.delay_s, self.trim = busy, delay_s, trim
        self._timer: asyncio.TimerHandle | None = None
        self._running: asyncio.Future | None = None
        self._last_work = 0.0
        self.trims = 0

    @property
    def pending(self) -> bool:
        """A trim is scheduled: work ended less than ``delay_s`` ago (or is running)."""
        return self._timer is not None

    def work_done(self) -> None:
        """On the event loop, when a computation released its slot: the quiet time starts
        again. Costs a clock read per request; one timer is armed at a time."""
        loop = asyncio.get_running_loop()
        self._last_work = loop.time()
        if self._timer is None:
            self._timer = loop.call_at(self._last_work + self.delay_s, self._fire)

    def _fire(self) -> None:
        loop = asyncio.get_running_loop()
        quiet_from = self._last_work + self.delay_s
        if loop.time() < quiet_from:             # work came since the timer was armed
            self._timer = loop.call_at(quiet_from, self._fire)
            return
        self._timer = None
        if self.busy() or (self._running is not None and not self._running.done()):
            return                      # work came back: the next release starts the wait
        self.trims += 1
        self._running = loop.run_in_executor(None, self.trim)
