"""A real sandbox in a subprocess on a free loopback port (for HTTP, hostile-input, bench
and browser tests). Usage: ``with running_sandbox(env={...}) as url: ...``."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from paths import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the sandbox exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        time.sleep(0.1)
    raise TimeoutError(f"{url} did not become healthy within {timeout} s")


@contextlib.contextmanager
def running_sandbox(env: dict | None = None, command: list[str] | None = None,
                    cwd: Path = ROOT, stderr: Any = None) -> Iterator[str]:
    """`stderr`: where the sandbox's log goes (a file to read it back); default: pytest's."""
    port = free_port()
    cmd = (command or [sys.executable, "-m", "glassllm_service.sandbox_cli"]) + [
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=stderr)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
