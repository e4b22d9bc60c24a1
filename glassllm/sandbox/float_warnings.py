"""NumPy's warnings of one computation, captured without leaking between threads (H4, H6).

NumPy reports two kinds of warnings:
- floating-point ones (divide by zero, overflow, invalid value) through its error state,
  which NumPy 2 keeps in a context variable: `FloatWarnings` records them per thread and
  per request, naming where they arose;
- a few through Python's `warnings` module ("Mean of empty slice"), whose state is global
  in Python 3.11. `install()` makes those raise (a per-call effect, so thread-safe), and
  `run_recording()` reruns the computation once under a lock to record their messages.

The ops route and the eval route (and `glassllm.sandbox.expr.evaluate`) use both.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import TypeVar

import numpy as np

__all__ = ["FloatWarnings", "install", "run_recording"]

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


class FloatWarnings:
    """NumPy's floating-point warnings of one evaluation, naming the node that raised them.

    NumPy 2 keeps the error state in a context variable, so this is per thread and per
    request (H6), unlike the `warnings` module's catch. The wording is the ops route's.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.where = ""

    def __call__(self, kind: str, flag: int) -> None:
        message = f"{kind} encountered (NumPy floating-point warning){self.where}"
        if message not in self.messages:
            self.messages.append(message)

    def __enter__(self) -> FloatWarnings:
        # Underflow to 0 is the exact, expected result of e.g. softmax over large logits:
        # not worth a warning. H4 names the other three.
        self._state = np.errstate(divide="call", over="call", invalid="call", under="ignore",
                                  call=self)
        self._state.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._state.__exit__(*exc)
