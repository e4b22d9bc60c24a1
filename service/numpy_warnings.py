"""NumPy warnings of one request, captured without leaking between threads (SPEC H4, H6).

NumPy reports two kinds of warnings:
- floating-point ones (divide by zero, overflow, invalid value) through its error state,
  which NumPy 2 keeps in a context variable: `glassllm.expr.FloatWarnings` records them
  per thread and per request;
- a few through Python's `warnings` module ("Mean of empty slice"), whose state is global
  in Python 3.11. `install()` makes those raise (a per-call effect, so thread-safe), and
  `run_recording()` reruns the computation once under a lock to record their messages.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
_LOCK = threading.Lock()


def install() -> None:
    """Turn NumPy's `warnings`-module warnings into exceptions (once per process)."""
    warnings.filterwarnings("error", category=RuntimeWarning, module="numpy")


def run_recording(fn: Callable[[], T], messages: list[str]) -> T:
    """`fn()`; if it raised a Warning, rerun it once recording the warnings into `messages`.

    The rerun holds a lock so two of our threads never swap the global warnings state at
    once; a warning raised meanwhile by a thread outside the service could still land here.
    """
    try:
        return fn()
    except Warning:
        with _LOCK, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        for w in caught:
            if str(w.message) not in messages:
                messages.append(str(w.message))
        return result
