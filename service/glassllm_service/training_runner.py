"""Training runs off the request path: one niced child process per run.

The route's async generator starts ``python -m glassllm_service.training_runner`` (a fresh
interpreter: no fork of a threaded server, no re-import of the server's main module),
sends it the run's settings as one JSON line on stdin, and reads back one JSON line per
``glassllm.training.stream.train_events`` event on stdout (``orjson``; nothing is unpickled).
The child lowers its own CPU priority (``os.nice``), so op requests win the CPU, and
the server reads the pipe with asyncio: a run holds no thread of the server's pool and
never competes with requests for the GIL.

Stopping: closing the ``events`` generator (the client went away, the server shuts
down, the wall-time limit passed) kills the child at once (SIGKILL: it holds nothing
that needs cleaning up). A child whose stdin closes (its server died) stops too.

Every stream ends with a word: a child that dies without its last event (killed, out of
memory) ends the events with an ``error`` of code ``process_died``; a server that shuts
down (SIGTERM) ends them with ``ShuttingDown``, which the route sends as an ``error`` of
code ``shutdown``. The child ignores SIGINT: a Ctrl+C in the server's terminal reaches its
whole process group, and the run must end by the server's word, not by its own death.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

CHILD_NICE = 10  # lower priority than the server's request handling
# One BLAS thread per run: a run's matmuls are small (the default model's largest is
# (512, 64) @ (64, 256)), and OpenBLAS's second thread only spun, measured 10.0 s of CPU
# for the default run against 5.1 s with one thread, in the same 5.1 s of wall time. The
# sizing (docs/settings.md) counts one core per run at once.
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                     "MKL_NUM_THREADS")}
LINE_LIMIT = 256 * 1024 * 1024  # the done event carries the weights (base64, ≤ ~140 MB)


class WallTimeExceeded(Exception):
    """The run passed GLASSLLM_MAX_TRAIN_SECONDS."""


class ShuttingDown(Exception):
    """The server is shutting down: the run was stopped."""


def died(returncode: int | None) -> bytes:
    """The ``error`` event of a child that ended without its last event."""
    how = (f"was killed by signal {-returncode}" if returncode is not None and returncode < 0
           else f"exited with status {returncode}")
    return orjson.dumps({"event": "error", "code": "process_died",
                         "message": f"the training process {how} before it finished",
                         "time": time.time()})


async def events(kwargs: dict[str, Any], max_seconds: float,
                 stop: Any = None) -> AsyncIterator[bytes]:
    """Start a run in a child process and yield its events (JSON bytes, one per event).

    `stop`: an event (asyncio's or anyio's: anything with an awaitable ``wait()``) set when
    the run must end now: the server shuts down, or the run was replaced.

    Raises ``WallTimeExceeded`` when the run passes ``max_seconds`` (counted from here),
    ``ShuttingDown`` once `stop` is set. A child that dies without its last event ends the
    events with a ``process_died`` error event. Closing the generator kills the child.
    """
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "glassllm_service.training_runner",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT,
        env={**os.environ, **ONE_THREAD})
    deadline = time.monotonic() + max_seconds
    stopped = asyncio.ensure_future(stop.wait()) if stop is not None else None
    try:
        child.stdin.write(orjson.dumps(kwargs) + b"\n")
        await child.stdin.drain()
        while True:
            left = max(deadline - time.monotonic(), 0.0)
            reading = asyncio.ensure_future(child.stdout.readline())
            try:
                await asyncio.wait({reading} | ({stopped} if stopped else set()), timeout=left,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not reading.done():
                    reading.cancel()
            if stopped is not None and stopped.done():
                raise ShuttingDown
            if not reading.done():
                raise WallTimeExceeded
            line = reading.result()
            if not line:                         # the child died without its last event
                yield died(await child.wait())
                return
            yield line.rstrip(b"\n")
            if line.startswith((b'{"event":"done"', b'{"event":"error"')):
                return
    finally:
        if stopped is not None:
            stopped.cancel()
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        with contextlib.suppress(Exception):
            await asyncio.shield(child.wait())


def _main() -> None:
    """The child: read the run's settings from stdin, write its events to stdout."""
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICE)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the server ends the run, not a Ctrl+C
    from glassllm.layers import GlassConfig
    from glassllm.training.stream import TrainingDiverged, train_events
    from glassllm_service.trained_weights import sign

    out = sys.stdout.buffer

    def send(event: dict[str, Any]) -> None:
        out.write(orjson.dumps(event) + b"\n")
        out.flush()

    try:
        kwargs = orjson.loads(sys.stdin.buffer.readline())
        config = GlassConfig(**kwargs.pop("config"))
        key = kwargs.pop("signing_key", None)       # course mode: sign the weights given back
        for event in train_events(config, **kwargs):
            if key is not None and event["event"] == "done":
                event = {**event, "weights": sign(event["weights"], bytes.fromhex(key))}
            send(event)
    except TrainingDiverged as exc:
        send({"event": "error", "code": "diverged", "step": exc.step,
              "message": f"training diverged: {exc}; try a smaller lr", "time": time.time()})
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped listening: the run was cancelled
    except Exception as exc:  # reported to the page, never a traceback
        with contextlib.suppress(OSError):
            send({"event": "error", "code": "failed",
                  "message": f"the run failed: {type(exc).__name__}", "time": time.time()})


if __name__ == "__main__":
    _main()
