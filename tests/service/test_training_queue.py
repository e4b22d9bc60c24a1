"""The training queue of one worker (glassllm_service/training_queue.py), in-process on an
event loop: first come first served, one run per owner (a second start replaces the
first, keeping its place in line), 503 with Retry-After only when the line is full, in a
student's words, the estimate, and whose run a request is."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from types import SimpleNamespace

import pytest

from glassllm.layers import GlassConfig
from glassllm.training import count_parameters
from glassllm_service import training_queue
from glassllm_service.http_errors import ApiError
from glassllm_service.training_queue import (
    OVERHEAD_S,
    Replaced,
    TrainingQueue,
    planned_seconds,
    run_owner,
)


def run(coro):
    return asyncio.run(coro)


def test_first_come_first_served_and_one_place_frees_per_run():
    async def go():
        q = TrainingQueue(capacity=2, max_waiting=3)
        a, b, c, d = (q.enter(name, 20, 1.0) for name in "abcd")
        assert a.granted.done() and b.granted.done()
        assert [q.place(t)[0] for t in (c, d)] == [1, 2]
        q.leave(b)
        assert c.granted.done() and not d.granted.done() and q.place(d)[0] == 1
        q.leave(b)                                           # twice: nothing more happens
        assert not d.granted.done() and len(q.running) == 2
        q.leave(d)                                           # a waiting run leaves the line
        assert q.waiting == [] and q.owners.keys() == {"a", "c"}
    run(go())


def test_only_a_full_line_refuses_with_retry_after_in_a_students_words():
    async def go():
        q = TrainingQueue(capacity=1, max_waiting=2)
        for name in "abc":
            q.enter(name, 20, 4.0)
        with pytest.raises(ApiError) as refused:
            q.enter("d", 20, 4.0)
        err = refused.value
        assert (err.status, err.code) == (503, "training_queue_full")
        assert int(err.headers["Retry-After"]) >= 1
        assert f"about {err.headers['Retry-After']} s" in err.message
        assert "GLASSLLM" not in err.message and "waiting line is full" in err.message
        off = TrainingQueue(capacity=0, max_waiting=10)
        with pytest.raises(ApiError) as refused:
            off.enter("a", 20, 1.0)
        assert (refused.value.status, refused.value.code) == (403, "training_off")
    run(go())


def test_a_second_start_replaces_the_first_and_keeps_its_place():
    async def go():
        q = TrainingQueue(capacity=1, max_waiting=2)
        running = q.enter("a", 20, 1.0)
        first = q.enter("b", 20, 1.0)
        q.enter("c", 20, 1.0)
        again = q.enter("b", 30, 1.0)                       # b changed its settings
        assert first.replaced.done() and q.place(again)[0] == 1
        assert len(q.waiting) == 2 and q.owners["b"] is again
        events = q.wait_turn(first)
        with pytest.raises(Replaced):
            await events.__anext__()
        q.leave(first)                                       # its stream's finally
        assert q.owners["b"] is again and q.place(again)[0] == 1
        # the running one replaced: it stops, the new run waits behind the others, even
        # when the line is full, so restarting never jumps the line
        anew = q.enter("a", 20, 1.0)
        assert running.replaced.done() and q.waiting[-1] is anew and len(q.waiting) == 3
        q.leave(running)
        assert again.granted.done() and q.place(anew)[0] == 2
    run(go())


def test_wait_turn_says_queued_then_position_as_the_line_moves(monkeypatch):
    monkeypatch.setattr(training_queue, "REFRESH_S", 0.3)

    async def go():
        q = TrainingQueue(capacity=1, max_waiting=5)
        ahead = q.enter("a", 20, 2.0)
        first = q.enter("b", 20, 2.0)
        mine = q.enter("c", 20, 2.0)
        events = q.wait_turn(mine)
        queued = await events.__anext__()
        assert (queued["event"], queued["position"], queued["waiting"]) == ("queued", 2, 2)
        assert queued["wait_s"] == pytest.approx(4.0, abs=0.2)   # a's 2 s, then b's
        assert queued["run_s"] == 2.0 and queued["runs_at_once"] == 1
        q.leave(first)                                       # b's client went away
        moved = await asyncio.wait_for(events.__anext__(), 1)
        assert (moved["event"], moved["position"]) == ("position", 1)
        assert moved["wait_s"] == pytest.approx(2.0, abs=0.2)
        refreshed = await asyncio.wait_for(events.__anext__(), 1.3)
        assert refreshed["position"] == 1                    # the estimate, kept live
        q.leave(ahead)
        with pytest.raises(StopAsyncIteration):              # its turn: no more line events
            await asyncio.wait_for(events.__anext__(), 1)
        assert mine.granted.done()
        q.leave(mine)
        now = q.enter("d", 20, 2.0)                          # a free slot: its turn at once
        told = [e async for e in q.wait_turn(now)]
        assert [(e["event"], e["position"], e["wait_s"]) for e in told] == [("queued", 0, 0)]
    run(go())


def test_the_estimate_uses_each_running_runs_own_pace_and_the_learned_pace():
    async def go():
        q = TrainingQueue(capacity=1, max_waiting=5)
        slow = q.enter("a", 100, 10.0)
        waiting = q.enter("b", 100, 10.0)
        loop = asyncio.get_running_loop()
        slow.started = slow.first_step = loop.time() - 4.0   # 41 steps in 4 s: 0.1 s each
        slow.steps_done = 41
        q._moved()
        assert q.place(waiting)[1] == pytest.approx(59 * 0.1, rel=0.02)
        slow.steps_done = 100                                 # done in 4 s, planned 10 s
        q.leave(slow)
        assert q.pace == pytest.approx(0.7 + 0.3 * 0.4, rel=0.02)
        assert q.enter("c", 100, 10.0) in q.waiting
        assert q.place(q.owners["c"])[1] == pytest.approx(10.0 * q.pace, rel=0.05)
    run(go())


def test_planned_seconds_grow_with_the_work_a_run_asks_for():
    config = GlassConfig()
    base = dataclasses.asdict(config)
    n = count_parameters(config)
    default = planned_seconds(base, 300, 8, 25, n)
    assert 3.0 < default < 8.0          # ~5 s of one core, measured (bench/train_queue.py)
    assert planned_seconds(base, 600, 8, 25, n) - OVERHEAD_S == pytest.approx(
        2 * (default - OVERHEAD_S))
    assert planned_seconds(base, 300, 32, 25, n) > 3 * default
    assert planned_seconds(base, 300, 8, 1, n) > planned_seconds(base, 300, 8, 300, n)


def request(headers: dict[str, str], host: str = "10.0.0.7") -> SimpleNamespace:
    return SimpleNamespace(headers={k.lower(): v for k, v in headers.items()},
                           client=SimpleNamespace(host=host))


def test_whose_run_a_request_is():
    token = run_owner(request({"Authorization": "Bearer s3cret", "X-Client-ID": "tab"}),
                      shared_token=False)
    assert re.fullmatch(r"token:[0-9a-f]{32}", token) and "s3cret" not in token
    assert token == run_owner(request({"authorization": "bearer s3cret"}, "10.0.0.8"),
                              shared_token=False)       # the same student, anywhere
    # the sandbox-wide GLASSLLM_API_TOKEN: every student sends it, so it names no one
    assert run_owner(request({"Authorization": "Bearer s3cret", "X-Client-ID": "tab"}),
                     shared_token=True) == "id:tab"
    assert run_owner(request({"X-Client-ID": " " + "x" * 80}), False) == "id:" + "x" * 64
    assert run_owner(request({"X-Forwarded-For": "203.0.113.9, 198.51.100.4"}),
                     False) == "ip:198.51.100.4"        # the hop the proxy itself added
    assert run_owner(request({}), False) == "ip:10.0.0.7"
