"""Slow and idle peers against a real sandbox, with real sockets (glassllm_service/server.py).

The embedded server (``glassllm-sandbox``, ``make run``) waited forever for headers, for a
body and for a client to read its answer, and took connections until the process ran out
of file descriptors. Each kind is tried here against a real server started with short
timeouts (1 s) and a small connection bound; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import httpx
import orjson
import pytest
from sandbox_server import ROOT, running_sandbox

TIMEOUT = 1.0                   # every timeout of the server under test, seconds
MAX_CONNECTIONS = 8
ENV = {"GLASSLLM_HEADER_TIMEOUT_S": str(TIMEOUT), "GLASSLLM_BODY_TIMEOUT_S": str(TIMEOUT),
       "GLASSLLM_SEND_TIMEOUT_S": str(TIMEOUT), "GLASSLLM_KEEPALIVE_TIMEOUT_S": str(TIMEOUT),
       "GLASSLLM_MAX_CONNECTIONS": str(MAX_CONNECTIONS), "GLASSLLM_ACCESS_LOG": "0"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server():
    with running_sandbox(env=ENV) as url:
        host, port = url.removeprefix("http://").split(":")
        yield url, (host, int(port))


def connect(address, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf is not None:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    s.connect(address)
    return s


def read_all(s: socket.socket, limit: float = 10.0) -> bytes:
    """Everything until the server closes (or `limit` seconds pass), resets included."""
    return read_to_close(s, limit)[0]


def read_to_close(s: socket.socket, limit: float) -> tuple[bytes, bool]:
    """Everything until the server closes, and whether it did within `limit` seconds (a
    bound on a hang, generous: not a measure of when)."""
    chunks, deadline = [], time.monotonic() + limit
    s.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(1 << 16)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return b"".join(chunks), True
        if not chunk:
            return b"".join(chunks), True
        chunks.append(chunk)
    return b"".join(chunks), False


def test_a_slowloris_gets_408_and_is_closed(server):
    _, address = server
    with connect(address) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: sandbox\r\n")
        with contextlib.suppress(OSError):          # the server may close while we write
            for i in range(12):                     # one header line every 0.25 s: 3 s
                time.sleep(0.25)
                s.sendall(b"X-Slow-%d: 1\r\n" % i)
        answer = read_all(s, limit=5)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"GLASSLLM_HEADER_TIMEOUT_S" in answer


def test_a_stalled_upload_gets_408_and_its_body_is_dropped(server):
    _, address = server
    with connect(address) as s:
        s.sendall(b"POST /api/v1/ops/neg HTTP/1.1\r\nHost: sandbox\r\n"
                  b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                  b'{"inputs": {"a": [' + b"1.0, " * 200)
        answer = read_all(s, limit=5)              # and then nothing more is sent
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"GLASSLLM_BODY_TIMEOUT_S" in answer


def test_a_client_that_never_reads_its_answer_is_cut(server):
    """A ~19 MB answer to a small request; the client reads nothing for 3 send timeouts:
    the server drops the answer and the connection, so reading afterwards gets only what
    the kernel's buffers already held."""
    _, address = server
    side = 1000
    a = [[i / 7] for i in range(side)]
    b = [[i / 11 for i in range(side)]]
    body = orjson.dumps({"inputs": {"a": a, "b": b}})
    with connect(address, rcvbuf=4096) as s:
        s.sendall(b"POST /api/v1/ops/mul HTTP/1.1\r\nHost: sandbox\r\nContent-Type:"
                  b" application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        time.sleep(3 * TIMEOUT + 1.0)
        received = read_all(s, limit=10)
    head, _, rest = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    assert length > 15_000_000
    assert len(rest) < length, "the whole answer was kept for a client that did not read"


def test_idle_connections_are_bounded_then_cleared(server):
    url, address = server
    time.sleep(TIMEOUT + 0.5)                       # earlier tests' connections are gone
    idle = [connect(address) for _ in range(MAX_CONNECTIONS)]
    extra = [connect(address) for _ in range(3)]
    try:
        for s in extra:                             # refused at once, with a word
            answer = read_all(s, limit=5)
            assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
            assert b"GLASSLLM_MAX_CONNECTIONS" in answer
        for s in idle:                              # closed by the header timeout
            assert read_all(s, limit=TIMEOUT + 4) == b""
        r = httpx.get(f"{url}/healthz", timeout=5)  # and the sandbox serves again
        assert r.status_code == 200
    finally:
        for s in idle + extra:
            s.close()


def test_a_kept_alive_connection_closes_after_the_idle_timeout(server):
    """The answer keeps the connection alive (no ``Connection: close``), and then, with
    nothing more sent, the server closes it: the idle timeout, not the answer, ended it.
    How long it took is not asserted (a busy machine stretches it): bench/slow_peers.py."""
    _, address = server
    with connect(address) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: sandbox\r\n\r\n")
        answer, closed = read_to_close(s, limit=TIMEOUT + 60)
    head = answer.partition(b"\r\n\r\n")[0].lower()
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"status":"ok"}')
    assert b"connection: close" not in head, head
    assert closed, "the idle connection was never closed"


def _limited(soft: int, hard: int):
    def preexec() -> None:
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    return preexec


def test_the_open_file_limit_is_raised_to_fit_the_connections():
    code = ("import resource; from glassllm_service.sandbox_cli import open_files_for;"
            " open_files_for(512);"
            " print(resource.getrlimit(resource.RLIMIT_NOFILE)[0])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, preexec_fn=_limited(256, 4096))
    assert out.returncode == 0 and int(out.stdout) == 512 + 64, out.stderr


def test_connections_past_the_hard_open_file_limit_stop_startup_in_one_line():
    out = subprocess.run([sys.executable, "-m", "glassllm_service.sandbox_cli",
                          "--port", "1"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "GLASSLLM_MAX_CONNECTIONS": "5000"},
                         preexec_fn=_limited(256, 1024))
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "glassllm-sandbox: GLASSLLM_MAX_CONNECTIONS=5000 needs 5064 open files per worker,"
        " but this process may open at most 1024 (ulimit -Hn); lower"
        " GLASSLLM_MAX_CONNECTIONS or raise the limit"]
