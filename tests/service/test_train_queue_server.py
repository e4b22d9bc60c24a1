"""A class trains at once, against a real sandbox and real training processes: runs wait
in line instead of being refused, each client sees its place within a second and its run
to the end, and a client that closes its stream leaves the line, or loses its process.

Bounds here (1 s, 3 s) are generous limits on what should take milliseconds, not speed
targets: the figures of 60 default runs are bench/train_queue.py's.
"""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from training_streams import TINY, sse_events, start_server, stop_server, training_children

pytestmark = pytest.mark.slow

RUN20 = {"model": TINY, "steps": 20, "every": 10, "lr": 0.01, "batch": 2, "seed": 3}
LONG = {**RUN20, "steps": 2000, "every": 2}   # ~14 s: a run that holds its slot until closed


def gauge(url: str, name: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return float(re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE).group(1))


def wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class Client:
    """One student's stream, read on a thread: every event with its arrival time."""

    def __init__(self, url: str, ident: str, body: dict) -> None:
        self.url, self.ident, self.body = url, ident, body
        self.events: list[tuple[str, dict, float]] = []
        self.status: int | None = None
        self.sent = 0.0
        self.close = threading.Event()
        self.seen = threading.Condition()
        self.thread = threading.Thread(target=self._read, daemon=True)

    def start(self) -> Client:
        self.thread.start()
        return self

    def _read(self) -> None:
        self.sent = time.monotonic()
        with httpx.stream("POST", f"{self.url}/api/v1/train", json=self.body, timeout=120,
                          headers={"X-Client-ID": self.ident}) as r:
            self.status = r.status_code
            if r.status_code != 200:
                r.read()
                return
            for name, data in sse_events(r.iter_lines()):
                with self.seen:
                    self.events.append((name, data, time.monotonic() - self.sent))
                    self.seen.notify_all()
                if self.close.is_set():
                    return          # the with-block closes the connection, as a closed tab

    def wait_for(self, pred, timeout: float = 60) -> tuple[str, dict, float]:
        with self.seen:
            assert self.seen.wait_for(lambda: any(pred(e) for e in self.events), timeout), \
                (self.ident, [e[0] for e in self.events])
            return next(e for e in self.events if pred(e))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.events]


def test_twelve_clients_wait_in_line_and_each_trains_to_the_end():
    """Default settings: 12 students start 20-step runs within 2 s. None is refused below
    the line's size, each sees its place within 1 s (position 0: it starts now), and each
    run trains to its last step, no more runs at once than the worker's slots; one client
    that closes its tab while in line leaves it."""
    proc, url = start_server()
    try:
        slots = int(gauge(url, "glassllm_training_slots"))
        clients = [Client(url, f"student-{i}", RUN20) for i in range(12)]
        leaver = clients[-1]                       # the last to come: certainly in line
        leaver.close.set()                         # it closes after its first event
        for c in clients:
            c.start()
            time.sleep(0.03)                       # 12 starts within ~0.4 s
        for c in clients:
            c.thread.join(120)
        assert [c.status for c in clients] == [200] * 12, "none refused below the size"
        for c in clients:
            name, data, after = c.events[0]
            assert name == "queued" and after < 1.0, (c.ident, name, after)
            assert data["runs_at_once"] == slots and data["wait_s"] >= 0
            positions = [d["position"] for n, d, _ in c.events if n in ("queued", "position")]
            assert positions == sorted(positions, reverse=True), "the line only moves up"
            assert (positions[-1] == 0) == (data["position"] == 0), "0: it starts at once"
            assert c is leaver or c.names()[len(positions)] == "start"
        assert leaver.names() == ["queued"] and leaver.events[0][1]["position"] >= 1
        waited = sum(c.events[0][1]["position"] >= 1 for c in clients)
        assert waited >= 12 - slots - 3, "most came while every slot was busy"
        for c in clients[:-1]:
            steps = [d["step"] for n, d, _ in c.events if n == "step"]
            assert steps == list(range(1, 21)) and c.names()[-1] == "done", c.ident
        # the child's own clock says when each run trained: never more than the slots
        spans = [(next(d["time"] for n, d, _ in c.events if n == "start"), c.events[-1][1]
                  ["time"]) for c in clients[:-1]]
        busiest = max(sum(s <= t < e for s, e in spans) for t, _ in spans)
        assert 1 <= busiest <= slots
        # every place given back: nothing waits or runs, no process is left
        assert wait_until(lambda: gauge(url, 'glassllm_training_runs{state="waiting"}') == 0
                          and gauge(url, 'glassllm_training_runs{state="running"}') == 0, 3)
        assert wait_until(lambda: not training_children(proc.pid), 3)
    finally:
        stop_server(proc)


@pytest.fixture(scope="module")
def one_slot():
    """A sandbox that trains one run at a time, with two places in line."""
    proc, url = start_server(env={"GLASSLLM_MAX_TRAINING_RUNS": "1",
                                  "GLASSLLM_MAX_TRAINING_QUEUE": "2"})
    yield proc, url
    stop_server(proc)


def test_a_closed_client_leaves_the_line_and_a_closed_run_loses_its_process(one_slot):
    proc, url = one_slot
    first = Client(url, "a", LONG).start()
    first.wait_for(lambda e: e[0] == "step")
    assert len(training_children(proc.pid)) == 1
    second = Client(url, "b", RUN20).start()
    second.wait_for(lambda e: e[0] == "queued" and e[1]["position"] == 1)
    third = Client(url, "c", RUN20).start()
    third.wait_for(lambda e: e[0] == "queued" and e[1]["position"] == 2)
    # the line is full: a fourth student is told so, in words, with when to come back
    r = httpx.post(f"{url}/api/v1/train", json=RUN20, headers={"X-Client-ID": "d"},
                   timeout=30)
    assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1
    assert r.json()["error"]["code"] == "training_queue_full"
    assert "GLASSLLM" not in r.json()["error"]["message"]
    second.close.set()                             # b closes its tab while in line
    second.thread.join(10)   # it reads on until an event comes: its estimate, ≤ 2 s later
    assert not second.thread.is_alive() and "start" not in second.names()
    moved = third.wait_for(lambda e: e[0] == "position" and e[1]["position"] == 1, 5)
    assert moved[2] < 10 and len(training_children(proc.pid)) == 1
    [a_pid] = training_children(proc.pid)
    first.close.set()                              # a closes its tab while training
    first.thread.join(10)
    # its process is gone within 3 s, and c's run takes the slot
    assert wait_until(lambda: a_pid not in training_children(proc.pid), 3)
    third.wait_for(lambda e: e[0] == "done", 30)
    assert [d["step"] for n, d, _ in third.events if n == "step"] == list(range(1, 21))
    assert "start" not in second.names()
    assert wait_until(lambda: not training_children(proc.pid), 3)


def test_a_second_start_replaces_the_first(one_slot):
    proc, url = one_slot
    first = Client(url, "same-tab", LONG).start()
    first.wait_for(lambda e: e[0] == "step")
    [first_pid] = training_children(proc.pid)
    second = Client(url, "same-tab", RUN20).start()
    _, data, _ = first.wait_for(lambda e: e[0] == "error", 10)
    assert data["code"] == "replaced" and "another run" in data["message"]
    first.thread.join(10)
    assert first.names()[-1] == "error" and "done" not in first.names()
    assert wait_until(lambda: first_pid not in training_children(proc.pid), 3)
    second.wait_for(lambda e: e[0] == "done", 30)
    assert second.names()[0] == "queued"
    with ThreadPoolExecutor(1) as pool:            # the slot is free again for anyone
        assert pool.submit(lambda: httpx.post(f"{url}/api/v1/train", json={**RUN20, "steps": 2},
                                              timeout=30).status_code).result() == 200
    assert wait_until(lambda: not training_children(proc.pid), 3)
