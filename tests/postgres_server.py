"""A real PostgreSQL server for a test: Debian's ``postgresql`` package (``make test``
installs it), a fresh cluster in a temporary directory on a free port, stopped by its PID.

``initdb`` and ``postgres`` refuse to run as root, so as root they run as the
``postgres`` user (``runuser``), in a directory given to that user. Durability is turned
off (``fsync=off``) unless `durable`: the tests check what the sandbox commits, not the
disk; the benchmark runs PostgreSQL as a course would.

Usage: ``with running_postgres() as url: ...`` (url: ``postgresql://glassllm@127.0.0.1:PORT/glassllm``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_server import free_port


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[4]) if Path(p).parts[4].isdigit() else 0)
    return Path(found[-1]).parent if found else None


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def running_postgres(max_connections: int = 100, durable: bool = False) -> Iterator[str]:
    bindir = postgres_bin()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's postgresql package is missing: make test installs it")
        pytest.skip("Debian's postgresql package is not installed (make test installs it)")
    root = Path(tempfile.mkdtemp(prefix="glassllm-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    port = free_port()
    proc = None
    try:
        subprocess.run(_as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "glassllm",
                                     "-A", "trust", "-E", "UTF8", "--no-sync"]),
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        fast = [] if durable else ["-c", "fsync=off", "-c", "synchronous_commit=off",
                                   "-c", "full_page_writes=off"]
        proc = subprocess.Popen(_as_postgres(
            [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
             "-c", "listen_addresses=127.0.0.1", *fast,
             "-c", f"max_connections={max_connections}"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"postgresql://glassllm@127.0.0.1:{port}"
        _wait(url + "/postgres", proc)
        import psycopg
        with psycopg.connect(url + "/postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE glassllm")
        yield url + "/glassllm"
    finally:
        if proc is not None:
            _stop(data, proc)
        shutil.rmtree(root, ignore_errors=True)


def _wait(url: str, proc: subprocess.Popen, timeout: float = 30) -> None:
    import psycopg
    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start") from None
            time.sleep(0.1)


def _stop(data: Path, proc: subprocess.Popen) -> None:
    """The postmaster stopped by its PID (postmaster.pid's first line): SIGINT is its
    fast shutdown, then SIGKILL after 10 s."""
    with contextlib.suppress(OSError, ValueError):
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGINT)
        for _ in range(100):
            os.kill(pid, 0)
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
