"""Training runs off the request path: one niced child process per run.

The route's async generator starts ``python -m service.training_runner`` (a fresh
interpreter: no fork of a threaded server, no re-import of the server's main module),
sends it the run's settings as one JSON line on stdin, and reads back one JSON line per
``glassllm.training.train_events`` event on stdout (``orjson``; nothing is unpickled).
The child lowers its own CPU priority (``os.nice``), so op requests win the CPU, and
the server reads the pipe with asyncio: a run holds no thread of the server's pool and
never competes with requests for the GIL.

Stopping: closing the ``events`` generator (the client went away, the server shuts
down, the wall-time limit passed) kills the child at once (SIGKILL: it holds nothing
that needs cleaning up). A child whose stdin closes (its server died) stops too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson

CHILD_NICE = 10  # lower priority than the server's request handling
LINE_LIMIT = 256 * 1024 * 1024  # the done event carries the weights (base64, ≤ ~140 MB)


class WallTimeExceeded(Exception):
    """The run passed GLASSLLM_MAX_TRAIN_SECONDS."""


async def events(kwargs: dict[str, Any], max_seconds: float) -> AsyncIterator[bytes]:
    """Start a run in a child process and yield its events (JSON bytes, one per event).

    Raises ``WallTimeExceeded`` when the run passes ``max_seconds``. A child that dies
    without a word ends the stream. Closing the generator kills the child.
    """
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "service.training_runner",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LINE_LIMIT)
    deadline = time.monotonic() + max_seconds
    try:
        child.stdin.write(orjson.dumps(kwargs) + b"\n")
        await child.stdin.drain()
        while True:
            left = deadline - time.monotonic()
            try:
                line = await asyncio.wait_for(child.stdout.readline(), timeout=max(left, 0.0))
            except TimeoutError:
                raise WallTimeExceeded from None
            if not line:
                return
            yield line.rstrip(b"\n")
            if line.startswith((b'{"event":"done"', b'{"event":"error"')):
                return
    finally:
        if child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                child.kill()
        with contextlib.suppress(Exception):
            await asyncio.shield(child.wait())


def _main() -> None:
    """The child: read the run's settings from stdin, write its events to stdout."""
    with contextlib.suppress(OSError):
        os.nice(CHILD_NICE)
    from glassllm.layers import GlassConfig
    from glassllm.training import TrainingDiverged, train_events

    out = sys.stdout.buffer

    def send(event: dict[str, Any]) -> None:
        out.write(orjson.dumps(event) + b"\n")
        out.flush()

    try:
        kwargs = orjson.loads(sys.stdin.buffer.readline())
        config = GlassConfig(**kwargs.pop("config"))
        for event in train_events(config, **kwargs):
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
