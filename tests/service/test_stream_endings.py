"""Every training stream ends with a word: ``done`` or an ``error`` event, then the close.

A real sandbox in a subprocess and a real training run. Before, a training process that
was killed ended the stream with a bare EOF (the page said "The stream ended."), and a
SIGTERM of the sandbox cut an open stream mid-body.
"""

from __future__ import annotations

import os
import signal

import httpx
import pytest
from training_streams import RUN, parse_sse, start_server, stop_server, training_children

pytestmark = pytest.mark.slow
LONG = {**RUN, "steps": 2000}


def _until_first_step(lines) -> list[str]:
    seen = []
    for line in lines:
        seen.append(line)
        if line.startswith("event: step"):
            break
    return seen


def test_a_killed_training_process_ends_the_stream_with_an_error():
    proc, url = start_server()
    try:
        with httpx.stream("POST", f"{url}/api/v1/train", json=LONG, timeout=60) as r:
            lines = r.iter_lines()
            seen = _until_first_step(lines)
            children = training_children(proc.pid)
            assert len(children) == 1, children
            os.kill(children[0], signal.SIGKILL)     # as the kernel's OOM killer would
            events = parse_sse([*seen, *lines])      # the rest, to the stream's end
        name, last = events[-1]
        assert name == "error" and last["code"] == "process_died", events[-1]
        assert "killed by signal 9" in last["message"] and last["run_id"]
        assert [n for n, _ in events].count("error") == 1
        assert proc.poll() is None                   # the sandbox itself is fine
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    finally:
        stop_server(proc)


def test_sigterm_ends_an_open_stream_with_a_shutdown_error():
    proc, url = start_server()
    try:
        with httpx.stream("POST", f"{url}/api/v1/train", json=LONG, timeout=60) as r:
            lines = r.iter_lines()
            seen = _until_first_step(lines)
            proc.send_signal(signal.SIGTERM)
            events = parse_sse([*seen, *lines])      # a clean end: no protocol error
        name, last = events[-1]
        assert name == "error" and last["code"] == "shutdown", events[-1]
        assert "shutting down" in last["message"]
        proc.wait(timeout=15)
        assert not training_children(proc.pid)
    finally:
        stop_server(proc)
