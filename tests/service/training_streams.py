"""A training run over real HTTP, as the training tests share it: the tiny run, the parsing
of its Server-Sent Events, a real sandbox in a session of its own, and the training
children of that session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from sandbox_server import ROOT, free_port, wait_healthy

TINY = {"d_model": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "ffn_hidden": 8,
        "max_seq_len": 8}
RUN = {"model": TINY, "steps": 4, "every": 2, "lr": 0.01, "batch": 2, "seed": 3}


def sse_events(lines) -> Iterator[tuple[str, dict]]:
    """(event name, data) pairs of an SSE stream's lines as they come (pings skipped)."""
    name, data = None, []
    for line in lines:
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line == "" and name is not None:
            yield name, json.loads("\n".join(data))
            name, data = None, []


def parse_sse(lines) -> list[tuple[str, dict]]:
    """(event name, data) pairs of an SSE stream's lines (pings, comments skipped)."""
    return list(sse_events(lines))


def start_server(workers: int = 1, env: dict | None = None):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "glassllm_service.sandbox_cli",
         "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers), "--log-level", "warning"],
        cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url, proc, timeout=60)
    return proc, url


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def training_children(server_pid: int) -> list[int]:
    """Pids of `python -m glassllm_service.training_runner` processes in the server's session.

    Read from /proc rather than `ps`: `ps` cuts its lines at $COLUMNS, and a checkout under
    a longer path (as CI's is) pushed the module's name past the cut."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            sid = os.getsid(int(entry))
        except (OSError, ProcessLookupError):
            continue  # gone between the listing and the read
        if b"glassllm_service.training_runner" in argv and sid == server_pid:
            found.append(int(entry))
    return found
