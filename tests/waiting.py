"""Waiting in tests without timing them: `wait_until` polls a condition and raises once a
generous timeout has passed. The timeout bounds a hang (a server that never starts); it
never grades a speed, so a busy machine only makes the wait longer, not the test red.
Speed is measured in bench/ (tests/repository/test_no_timed_assertions.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(check: Callable[[], T], timeout: float = 60.0, what: str = "the condition",
               every: float = 0.05) -> T:
    """`check()`'s first truthy result; TimeoutError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"waited {timeout:g} s for {what}")
        time.sleep(every)
