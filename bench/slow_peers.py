"""Slow and idle peers against a real sandbox: the server's memory and whether it still
serves (glassllm_service/server.py's guard).

Three kinds, one after the other, each against a fresh server (one worker):

- **slow readers**: 10 clients each ask for an ~80 MB answer (a (2000, 1) · (1, 2000)
  product) and never read it;
- **stalled uploads**: 64 clients each declare an 8 MiB body, send all of it but one
  byte, and stall;
- **idle connections**: 1 100 connections that send nothing (past the common 1 024
  open-file limit), then a /healthz.

For each: the server's RSS before, while the peers hold on, and after the guard's timeout
has passed (peers still connected), and for the idle flood whether /healthz answered and
how. ``--unguarded`` runs the same against plain uvicorn (the server before the guard).

    python bench/slow_peers.py [--timeout 5] [--unguarded] [--only idle]

Figures only: nothing here asserts anything. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.sandbox_server import free_port, wait_healthy  # noqa: E402

MiB = 1024 * 1024


def rss(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / MiB
    return float("nan")


@contextlib.contextmanager
def server(timeout: float, unguarded: bool, open_files: int | None = None):
    port = free_port()
    env = {**os.environ, "GLASSLLM_ACCESS_LOG": "0", "GLASSLLM_HEADER_TIMEOUT_S": str(timeout),
           "GLASSLLM_BODY_TIMEOUT_S": str(timeout), "GLASSLLM_SEND_TIMEOUT_S": str(timeout)}
    cmd = ([sys.executable, "-m", "uvicorn", "--factory", "glassllm_service.app:create_app",
            "--log-level", "warning", "--port", str(port)] if unguarded else
           [sys.executable, "-m", "glassllm_service.sandbox_cli",
            "--log-level", "warning", "--port", str(port)])

    def limit() -> None:                  # the common default: 1 024 open files
        if open_files:
            import resource
            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files * 4))

    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, preexec_fn=limit)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield proc, url, ("127.0.0.1", port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def slow_readers(timeout: float, unguarded: bool) -> None:
    rng = np.random.default_rng(0)
    body = orjson.dumps({"inputs": {"a": rng.normal(size=(2000, 1)).tolist(),
                                    "b": rng.normal(size=(1, 2000)).tolist()}})
    request = (b"POST /api/v1/ops/mul HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with server(timeout, unguarded) as (proc, _url, address):
        before = rss(proc.pid)
        peers = []
        for _ in range(10):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(address)
            s.sendall(request)
            peers.append(s)
            time.sleep(1.0)                # each answered in turn, none read
        held = rss(proc.pid)
        time.sleep(2 * timeout + 3)
        after = rss(proc.pid)
        alive = sum(_open(s) for s in peers)
        for s in peers:
            s.close()
    print(f"slow readers (10 x ~80 MB unread): RSS {before:.0f} -> {held:.0f} MiB while held,"
          f" {after:.0f} MiB after {2 * timeout + 3:.0f} s; connections still open: {alive}")


def _open(s: socket.socket) -> bool:
    """The server has not closed or reset this connection."""
    s.setblocking(False)
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                return False
    except BlockingIOError:
        return True
    except OSError:
        return False


def stalled_uploads(timeout: float, unguarded: bool) -> None:
    size = 8 * MiB
    head = (b"POST /api/v1/ops/neg HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % size)
    payload = b'{"inputs": {"a": [' + b"1.0, " * ((size - 40) // 5)
    payload = payload[: size - 1]
    with server(timeout, unguarded) as (proc, _url, address):
        before = rss(proc.pid)
        peers = []
        for _ in range(64):
            s = socket.socket()
            s.connect(address)
            s.sendall(head + payload)
            peers.append(s)
        time.sleep(1.0)
        held = rss(proc.pid)
        time.sleep(timeout + 3)
        after = rss(proc.pid)
        alive = sum(_open(s) for s in peers)
        for s in peers:
            s.close()
    print(f"stalled uploads (64 x 8 MiB - 1 byte): RSS {before:.0f} -> {held:.0f} MiB while"
          f" held, {after:.0f} MiB after {timeout + 3:.0f} s; connections still open: {alive}")


def idle_connections(timeout: float, unguarded: bool) -> None:
    with server(timeout, unguarded, open_files=1024) as (_proc, url, address):
        peers = []
        for _ in range(1100):
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect(address)
            except OSError:
                s.close()
                break
            peers.append(s)
        time.sleep(0.5)
        t0 = time.perf_counter()
        try:
            status = str(httpx.get(f"{url}/healthz", timeout=5).status_code)
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        during = time.perf_counter() - t0
        time.sleep(timeout + 2)
        t0 = time.perf_counter()
        try:
            later = str(httpx.get(f"{url}/healthz", timeout=5).status_code)
        except httpx.HTTPError as exc:
            later = type(exc).__name__
        alive = sum(_open(s) for s in peers)
        for s in peers:
            s.close()
    print(f"idle connections ({len(peers)} opened, server limited to 1024 files): /healthz"
          f" during: {status} in {during:.2f} s; after {timeout + 2:.0f} s: {later};"
          f" idle connections still open: {alive}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=5.0,
                        help="header, body and send timeouts of the server (default 5 s)")
    parser.add_argument("--unguarded", action="store_true",
                        help="plain uvicorn, as the sandbox was served before the guard")
    parser.add_argument("--only", choices=("slow", "stalled", "idle"), action="append")
    args = parser.parse_args()
    for name, fn in (("slow", slow_readers), ("stalled", stalled_uploads),
                     ("idle", idle_connections)):
        if not args.only or name in args.only:
            fn(args.timeout, args.unguarded)


if __name__ == "__main__":
    main()
