"""The worker processes' shared metrics files (prometheus_client's multiprocess mode).

With several workers each process writes its metrics to files of its own in
``PROMETHEUS_MULTIPROC_DIR`` (``counter_<pid>.db``, ``gauge_livesum_<pid>.db`` …) and
``/metrics`` sums them. Two things the client library leaves to whoever runs the workers
(its documentation says so), done here by `glassllm-sandbox` in the parent process:

- **before any worker starts** (`prepare_metrics_dir`): the directory must exist and be
  writable — else every worker died on its first metric with a traceback, uvicorn
  restarted it forever, and the port stayed bound with nothing answering; the sandbox now
  stops at once with one line naming the variable. The previous run's files are removed,
  so a restart on the same directory does not carry its counters over; a directory that
  holds anything else (``/tmp``, a typo for another directory) is refused, never emptied.
- **when a worker ends** (`Supervisor`): its live gauges (``glassllm_slots_busy``,
  ``glassllm_queue_depth``, ``glassllm_slots``: ``multiprocess_mode="livesum"``) are
  marked dead (``multiprocess.mark_process_dead``), so a killed worker's busy slot stops
  counting; its counters stay, as they count what it answered.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from uvicorn.supervisors import Multiprocess

# the files the client library writes: <type>[_<gauge mode>]_<pid>.db (values.py)
METRICS_FILE = re.compile(r"[a-z]+(?:_[a-z]+)?_[0-9]+\.db")
VARIABLE = "PROMETHEUS_MULTIPROC_DIR"


class MetricsDirError(ValueError):
    """One line: the variable, the directory and what is wrong with it."""


def prepare_metrics_dir(path: str) -> None:
    """Check that the workers can write metrics to `path`, then remove the previous run's
    files. Raises `MetricsDirError` (the module docstring says why)."""
    where = f"{VARIABLE}={path!r}"
    folder = Path(path)
    if not path or not folder.is_dir():
        raise MetricsDirError(f"{where} is not a directory: create it, or leave {VARIABLE}"
                              " unset and glassllm-sandbox makes one for the run")
    try:
        entries = list(folder.iterdir())
    except OSError as exc:
        raise MetricsDirError(f"{where} cannot be read: {exc.strerror}") from None
    foreign = sorted(e.name for e in entries if not METRICS_FILE.fullmatch(e.name))
    if foreign:
        shown = ", ".join(repr(n) for n in foreign[:3]) + (" …" if len(foreign) > 3 else "")
        raise MetricsDirError(f"{where} holds files that are not metrics files ({shown}):"
                              " give the metrics a directory of their own")
    try:            # a file with bytes in it, as each worker's first metric writes one
        with tempfile.TemporaryFile(dir=folder, buffering=0) as probe:
            probe.write(bytes(4096))
        for entry in entries:                        # the previous run's counters
            entry.unlink()
    except OSError as exc:
        raise MetricsDirError(f"{where} is not writable: {exc.strerror}; the workers write"
                              " their metrics there") from None


def mark_dead(pid: int, path: str | None) -> None:
    """Remove `pid`'s live-gauge files from `path` (the client library's bookkeeping)."""
    if path:
        from prometheus_client import multiprocess
        with contextlib.suppress(OSError):
            multiprocess.mark_process_dead(pid, path)


class Supervisor(Multiprocess):
    """uvicorn's supervisor of the worker processes, which also marks every worker that
    ended dead in the metrics directory: one found dead (killed, crashed) and replaced,
    one retired by a restart (SIGHUP) or by fewer workers (SIGTTOU), every one at exit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metrics_dir = os.environ.get(VARIABLE)
        self._marked: set[int] = set()

    def _mark_ended(self, processes: list) -> None:
        for process in processes:
            pid = process.pid
            if pid is not None and process.exitcode is not None and pid not in self._marked:
                mark_dead(pid, self.metrics_dir)
                self._marked.add(pid)

    def keep_subprocess_alive(self) -> None:
        before = list(self.processes)
        super().keep_subprocess_alive()
        self._mark_ended(before)

    def handle_signals(self) -> None:
        before = list(self.processes)
        super().handle_signals()
        self._mark_ended(before)

    def join_all(self) -> None:
        super().join_all()
        self._mark_ended(self.processes)


@contextlib.contextmanager
def supervised() -> Iterator[None]:
    """`uvicorn.run` with several workers supervised by `Supervisor`: uvicorn.run takes its
    supervisor class from its module, so it is swapped there for the call, and restored."""
    module = importlib.import_module("uvicorn.main")
    saved = module.Multiprocess
    module.Multiprocess = Supervisor
    try:
        yield
    finally:
        module.Multiprocess = saved
