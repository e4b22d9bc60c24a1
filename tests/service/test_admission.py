"""Admission (H5): requests wait for a compute slot in a bounded queue; small work
is not stuck behind large; clients take turns; a hang-up leaves the queue unrun.

Every test holds slots with tasks it releases through events it controls: no test
depends on a wall-clock sleep or on how fast this machine is (the one timeout test
waits for a deadline that nothing can meet, since the slot is never released).
"""

from __future__ import annotations

import asyncio

import pytest

from glassllm_service.admission import LARGE, SMALL, Admission, ClientGone, client_key
from glassllm_service.http_errors import ApiError

SMALL_COST, LARGE_COST = 10, 10**8


def admission(capacity=1, max_queue=8, timeout_s=60.0) -> Admission:
    return Admission(capacity, max_queue, timeout_s, large_cost=1000, retry_after=3)


async def until(condition) -> None:
    """Yield to the loop until `condition()` holds (bounded: fails instead of hanging)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


class Holder:
    """A request that holds a slot until `release()`; `order` records admissions."""

    def __init__(self, adm: Admission, name: str, cost: int = SMALL_COST, client: str = "c",
                 order: list | None = None, request=None) -> None:
        self.name, self.admitted, self.gate = name, False, asyncio.Event()
        self.order = order if order is not None else []

        async def run():
            async with adm.slot(cost=cost, client=client, request=request):
                self.admitted = True
                self.order.append(name)
                await self.gate.wait()

        self.task = asyncio.ensure_future(run())

    def release(self) -> None:
        self.gate.set()


def run(coro):
    return asyncio.run(coro)


def test_a_request_waits_for_the_slot_then_runs():
    async def main():
        adm = admission(capacity=1)
        a = Holder(adm, "a")
        await until(lambda: a.admitted)
        b = Holder(adm, "b")
        await until(lambda: adm.waiting == 1)
        assert not b.admitted and adm.running == 1
        a.release()
        await until(lambda: b.admitted)
        assert (adm.running, adm.waiting) == (1, 0)
        b.release()
        await asyncio.gather(a.task, b.task)
        assert (adm.running, adm.waiting) == (0, 0)
    run(main())


def test_a_full_queue_is_503_with_retry_after_at_once():
    async def main():
        adm = admission(capacity=1, max_queue=1)
        a = Holder(adm, "a")
        await until(lambda: a.admitted)
        b = Holder(adm, "b")
        await until(lambda: adm.waiting == 1)
        with pytest.raises(ApiError) as exc:
            async with adm.slot(cost=SMALL_COST, client="c"):
                pass
        assert (exc.value.status, exc.value.code) == (503, "queue_full")
        assert exc.value.headers == {"Retry-After": "3"}
        assert "GLASSLLM_MAX_QUEUE" in exc.value.message
        a.release()
        await until(lambda: b.admitted)
        b.release()
        await asyncio.gather(a.task, b.task)
    run(main())


def test_the_deadline_is_503_with_retry_after_and_leaves_the_queue():
    async def main():
        adm = admission(capacity=1, timeout_s=0.001)
        a = Holder(adm, "a")                 # never released before the deadline
        await until(lambda: a.admitted)
        with pytest.raises(ApiError) as exc:
            async with adm.slot(cost=SMALL_COST, client="c"):
                pass
        assert (exc.value.status, exc.value.code) == (503, "queue_timeout")
        assert exc.value.headers == {"Retry-After": "3"}
        assert "GLASSLLM_QUEUE_TIMEOUT_S" in exc.value.message
        assert (adm.running, adm.waiting) == (1, 0)
        a.release()
        await a.task
        assert adm.running == 0
    run(main())


def test_a_small_request_takes_a_free_slot_while_large_ones_queue():
    """Large work holds at most capacity - 1 slots: the last one is free for small work."""
    async def main():
        adm = admission(capacity=2)
        big = [Holder(adm, f"big{i}", cost=LARGE_COST, client=f"g{i}") for i in range(3)]
        await until(lambda: adm.waiting == 2)
        assert [h.admitted for h in big] == [True, False, False]
        assert adm.busy == {SMALL: 0, LARGE: 1}
        small = Holder(adm, "small", cost=SMALL_COST, client="student")
        await until(lambda: small.admitted)          # admitted without any release
        assert adm.waiting == 2
        for h in (small, *big):
            h.release()
        await asyncio.gather(small.task, *(h.task for h in big))
    run(main())


def test_when_a_slot_frees_the_lanes_take_turns():
    """After a large request, a waiting small one goes first; a stream of small requests
    does not starve a large one either (it gets every other free slot)."""
    async def main():
        adm = admission(capacity=1)
        order: list[str] = []
        first = Holder(adm, "first", cost=LARGE_COST, order=order)
        await until(lambda: first.admitted)
        queued = [Holder(adm, "big", cost=LARGE_COST, client="grader", order=order),
                  *(Holder(adm, f"small{i}", cost=SMALL_COST, client=f"s{i}", order=order)
                    for i in range(3))]
        await until(lambda: adm.waiting == 4)
        for h in (first, *queued):
            h.release()
        await asyncio.gather(first.task, *(h.task for h in queued))
        assert order == ["first", "small0", "big", "small1", "small2"]
    run(main())


def test_clients_take_turns():
    """A grader queues three requests, then a student one: the student goes second."""
    async def main():
        adm = admission(capacity=1)
        order: list[str] = []
        first = Holder(adm, "first", client="x", order=order)
        await until(lambda: first.admitted)
        queued = [Holder(adm, f"grader{i}", client="grader", order=order) for i in range(3)]
        await until(lambda: adm.waiting == 3)
        queued.append(Holder(adm, "student", client="student", order=order))
        await until(lambda: adm.waiting == 4)
        for h in (first, *queued):
            h.release()
        await asyncio.gather(first.task, *(h.task for h in queued))
        assert order == ["first", "grader0", "student", "grader1", "grader2"]
    run(main())


class HangingUp:
    """An ASGI request whose client disconnects when the test says so."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> dict:
        await self.gone.wait()
        return {"type": "http.disconnect"}


def test_a_client_that_hangs_up_while_queued_leaves_and_its_work_never_runs():
    async def main():
        adm = admission(capacity=1)
        a = Holder(adm, "a")
        await until(lambda: a.admitted)
        request, ran = HangingUp(), []

        async def queued():
            async with adm.slot(cost=SMALL_COST, client="c", request=request):
                ran.append("work")

        task = asyncio.ensure_future(queued())
        await until(lambda: adm.waiting == 1)
        request.gone.set()
        with pytest.raises(ClientGone) as exc:
            await task
        assert exc.value.status == 499 and adm.waiting == 0
        a.release()
        await a.task
        assert ran == [] and adm.running == 0
    run(main())


def test_a_cancelled_waiter_leaves_the_queue():
    async def main():
        adm = admission(capacity=1)
        a = Holder(adm, "a")
        await until(lambda: a.admitted)
        b = Holder(adm, "b")
        await until(lambda: adm.waiting == 1)
        b.task.cancel()
        await until(lambda: b.task.done())
        assert adm.waiting == 0 and not b.admitted
        a.release()
        await a.task
        assert adm.running == 0
    run(main())


class Req:
    def __init__(self, headers: dict, host: str = "10.0.0.7") -> None:
        self.headers = headers
        self.client = type("Client", (), {"host": host})()


def test_the_client_key_is_the_x_client_id_else_the_peer_address():
    assert client_key(Req({})) == "ip:10.0.0.7"
    assert client_key(Req({"x-client-id": "tab-42"})) == "id:tab-42"
    assert client_key(Req({"x-client-id": "z" * 100})) == "id:" + "z" * 64


def test_lanes_follow_the_planned_cost():
    adm = admission()
    assert adm.lane_of(1000) == SMALL and adm.lane_of(1001) == LARGE


def test_an_op_request_is_planned_before_it_waits():
    """The cost of an op request is the library's `Prepared.cost` from its shape plan:
    (elements, multiply-adds); its lane compares their sum with GLASSLLM_LARGE_COST."""
    import numpy as np
    import orjson

    from glassllm.sandbox import registry
    from glassllm_service.admission import weight
    from glassllm_service.requests.op_call import prepare
    from glassllm_service.settings import Settings
    s, matmul = Settings(), registry.get("matmul")
    small = prepare(registry.get("softmax"), {"inputs": {"a": [[0.0] * 8] * 4}}, False, s)
    assert small.cost == (32, 0)                           # (4, 8) out, no matmul
    m = [[1.0] * 256] * 256
    big = prepare(matmul, {"inputs": {"a": m, "b": m}}, False, s)
    plan = matmul.plan({"a": np.ones((256, 256)), "b": np.ones((256, 256))})
    assert plan.madds == 3 * 256**3                        # forward + 2 backward matmuls
    assert big.cost == (256 * 256 + sum(n for _, n in plan.sizes), 3 * 256**3)
    assert weight(big.cost) > s.large_cost > weight(small.cost)
    adm = admission()
    assert adm.lane_of(small.cost) == SMALL and adm.lane_of(big.cost) == LARGE
    assert orjson.loads(big.answer())["value"][0][0] == 256.0


def test_an_expression_is_planned_before_it_waits():
    """/api/v1/eval's cost comes from the expression's plan (glassllm.sandbox.expr.prepare), before
    any compute: a (256, 256) matmul expression is large, a (4, 8) softmax small, and a
    check adds its finite-difference passes."""
    from glassllm.sandbox import expr
    from glassllm_service.admission import weight
    from glassllm_service.settings import Settings
    s = Settings()
    m = [[1.0] * 256] * 256
    big = expr.prepare("a @ b", {"a": m, "b": m}, limits=s.limits)
    assert big.cost[1] == 3 * 256**3 and weight(big.cost) > s.large_cost
    small = expr.prepare("softmax(x)", {"x": [[0.0] * 8] * 4}, limits=s.limits)
    assert small.cost[1] == 0 and weight(small.cost) < s.large_cost
    checked = expr.prepare("softmax(x)", {"x": [[0.0] * 8] * 4}, check=True, limits=s.limits)
    assert checked.cost[0] > small.cost[0]
    assert expr.run(small) == expr.evaluate("softmax(x)", {"x": [[0.0] * 8] * 4})


def test_over_http_a_softmax_passes_a_queued_matmul():
    """The routes pass each request's planned cost: with one of two slots held by large
    work, a (256, 256) matmul waits (large work never holds every slot) while a (4, 8)
    softmax is answered; releasing the slot lets the matmul through."""
    from concurrent.futures import ThreadPoolExecutor

    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app
    from glassllm_service.settings import Settings

    app = create_app(Settings(max_concurrency=2))
    adm = app.state.admission
    m = [[1.0] * 256] * 256
    with TestClient(app) as c, ThreadPoolExecutor(1) as pool:
        release = c.portal.call(_new_event)
        held = c.portal.start_task_soon(_hold, adm, release, LARGE_COST)
        c.portal.call(until, lambda: adm.busy[LARGE] == 1)
        matmul = pool.submit(c.post, "/api/v1/ops/matmul", json={"inputs": {"a": m, "b": m}})
        c.portal.call(until, lambda: adm.lanes[LARGE].waiting == 1)
        r = c.post("/api/v1/ops/softmax", json={"inputs": {"a": [[0.0] * 8] * 4}})
        assert r.status_code == 200 and r.json()["value"][0][0] == 0.125
        assert adm.lanes[LARGE].waiting == 1 and not matmul.done()
        c.portal.call(release.set)
        held.result()
        assert matmul.result().json()["value"][0][0] == 256.0


def test_over_http_an_eval_softmax_passes_a_queued_eval_matmul():
    """/api/v1/eval passes its expression's planned cost too (not its body size): an
    `a @ b` of (256, 256) waits for the large lane while a softmax expression is answered."""
    from concurrent.futures import ThreadPoolExecutor

    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app
    from glassllm_service.settings import Settings

    app = create_app(Settings(max_concurrency=2))
    adm = app.state.admission
    m = [[1.0] * 256] * 256
    with TestClient(app) as c, ThreadPoolExecutor(1) as pool:
        release = c.portal.call(_new_event)
        held = c.portal.start_task_soon(_hold, adm, release, LARGE_COST)
        c.portal.call(until, lambda: adm.busy[LARGE] == 1)
        matmul = pool.submit(c.post, "/api/v1/eval",
                             json={"expression": "a @ b", "variables": {"a": m, "b": m}})
        c.portal.call(until, lambda: adm.lanes[LARGE].waiting == 1)
        r = c.post("/api/v1/eval", json={"expression": "softmax(x)",
                                         "variables": {"x": [[0.0] * 8] * 4}})
        assert r.status_code == 200 and r.json()["value"][0][0] == 0.125
        assert adm.lanes[LARGE].waiting == 1 and not matmul.done()
        c.portal.call(release.set)
        held.result()
        assert matmul.result().json()["value"][0][0] == 256.0


def test_refuse_if_full_only_when_every_slot_is_busy_and_the_queue_is_full():
    """The check made before a body is read refuses exactly what `slot` would refuse for
    any lane: a free slot, or room in the queue, lets the request on to its body."""
    async def main():
        adm = admission(capacity=1, max_queue=1)
        adm.refuse_if_full()                      # idle: nothing refused
        a = Holder(adm, "a")
        await until(lambda: a.admitted)
        adm.refuse_if_full()                      # slot busy, queue empty: room to wait
        b = Holder(adm, "b")
        await until(lambda: adm.waiting == 1)
        with pytest.raises(ApiError) as exc:
            adm.refuse_if_full()
        assert (exc.value.status, exc.value.code) == (503, "queue_full")
        assert exc.value.headers == {"Retry-After": "3"}
        a.release()                               # b takes the slot: the queue has room
        await until(lambda: b.admitted)
        adm.refuse_if_full()
        b.release()
        await asyncio.gather(a.task, b.task)
    run(main())


def test_with_waiting_off_the_refusal_says_so():
    """GLASSLLM_MAX_QUEUE=0: the 503 says every slot is busy and waiting is off, not that
    "0 requests are already waiting"."""
    async def main():
        adm = admission(capacity=1, max_queue=0)
        a = Holder(adm, "a")
        await until(lambda: a.admitted)
        with pytest.raises(ApiError) as exc:
            adm.refuse_if_full()
        assert exc.value.message == ("the sandbox is busy: every compute slot is busy and"
                                     " waiting is off (GLASSLLM_MAX_QUEUE=0); retry shortly")
        a.release()
        await a.task
    run(main())


def test_over_http_a_full_queue_refuses_before_reading_the_body():
    """Every slot busy and the queue full: a request is a 503 queue_full with Retry-After
    before its body is read or decoded (an overload's refused (256, 256) matmuls
    no longer each read and decode megabytes). The body sent here is not even JSON: it is
    never looked at."""
    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app
    from glassllm_service.settings import Settings

    app = create_app(Settings(max_concurrency=1, max_queue=1))
    adm = app.state.admission
    with TestClient(app) as c:
        release = c.portal.call(_new_event)
        held = c.portal.start_task_soon(_hold, adm, release, SMALL_COST)
        c.portal.call(until, lambda: adm.running == 1)
        queued = c.portal.start_task_soon(_hold, adm, release, SMALL_COST)
        c.portal.call(until, lambda: adm.waiting == 1)
        try:
            full = [c.post(path, content=body, headers={"Content-Type": "application/json"})
                    for path, body in (("/api/v1/ops/softmax", b"not json at all"),
                                       ("/api/v1/eval", b"{"))]
            # a declared length over the limit stays the permanent 413, not a retry later
            too_big = c.post("/api/v1/ops/softmax", content=b"x",
                             headers={"Content-Type": "application/json",
                                      "Content-Length": str(10**12)})
            # a training run takes no compute slot: its body is read and checked as ever
            train = c.post("/api/v1/train", json={"steps": 10**9})
        finally:                 # the held slot and the queued waiter always finish
            c.portal.call(release.set)
            held.result(), queued.result()
        for r in full:
            assert r.status_code == 503 and r.json()["error"]["code"] == "queue_full"
            assert r.headers["Retry-After"] == str(adm.retry_after)
        assert full[0].json()["error"]["op"] == "softmax"     # the op's route names its op
        assert full[0].json()["error"]["message"] == (
            "the sandbox is busy: 1 request is already waiting for a compute slot"
            " (GLASSLLM_MAX_QUEUE); retry shortly")
        assert too_big.status_code == 413 and too_big.json()["error"]["code"] == "body_too_large"
        assert train.status_code == 422 and train.json()["error"]["code"] == "too_many_steps"
        r = c.post("/api/v1/ops/softmax", content=b"not json at all",   # room again: read,
                   headers={"Content-Type": "application/json"})        # and refused as JSON
        assert r.status_code == 422


async def _new_event() -> asyncio.Event:
    return asyncio.Event()


async def _hold(adm: Admission, release: asyncio.Event, cost: int) -> None:
    async with adm.slot(cost=cost, client="holder"):
        await release.wait()


# --------------------------------------------------------------------------------------
# Memory back to the OS after a burst (RSS growth; glassllm_service/memory.py)
# --------------------------------------------------------------------------------------
def test_the_idle_trim_runs_once_after_the_last_computation_and_never_while_busy():
    """The trim waits for a quiet moment after work: a release while others still run or
    wait pushes it back; once all are done it runs exactly once (a fake trim records it)."""
    from glassllm_service.memory import IdleTrim

    async def main():
        calls: list[int] = []

        def trim():
            calls.append(1)
            return True

        adm = admission(capacity=1)
        idle = IdleTrim(busy=lambda: bool(adm.running or adm.waiting), delay_s=0.0, trim=trim)
        adm.on_release = idle.work_done
        a, b = Holder(adm, "a"), Holder(adm, "b")
        await until(lambda: a.admitted and adm.waiting == 1)
        a.release()                                  # b still runs: the timer finds it busy
        await until(lambda: b.admitted)
        for _ in range(20):
            await asyncio.sleep(0)
        assert calls == [] and idle.trims == 0
        b.release()
        await asyncio.gather(a.task, b.task)
        await until(lambda: idle.trims == 1)
        await idle._running                          # the thread's call has finished
        assert calls == [1]
        for _ in range(20):                          # nothing more without new work
            await asyncio.sleep(0)
        assert idle.trims == 1
    run(main())


def test_the_sandbox_admission_trims_memory_after_work():
    """from_settings wires the trim (glibc's malloc_trim) to every slot release."""
    from glassllm_service.admission import from_settings
    from glassllm_service.memory import IdleTrim, collect_and_trim
    from glassllm_service.settings import Settings

    adm = from_settings(Settings())
    assert isinstance(adm.idle_trim, IdleTrim) and adm.on_release == adm.idle_trim.work_done
    assert adm.idle_trim.trim is collect_and_trim and adm.idle_trim.delay_s > 0


def test_a_refused_large_body_also_schedules_the_memory_trim():
    """Memory stayed high after a burst of refused matmuls, once: a body past the
    off-loop size schedules the trim when its parse-and-prepare step ends, refused or not;
    a small refused one does not (it never left the event loop, nor took a slot)."""
    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app

    def refused_then_pending(rows: int) -> bool:
        with TestClient(create_app()) as c:
            r = c.post("/api/v1/ops/matmul", json={"inputs": {"a": [[1.0] * 3000] * rows,
                                                              "b": [[1.0] * 4] * 3}})
            assert r.status_code == 400 and r.json()["error"]["code"] == "numpy_error", r.text
            trim = c.app.state.admission.idle_trim
            return trim.pending or trim.trims > 0    # scheduled, or already ran (slow CI)

    assert refused_then_pending(6) is True        # ~72 KB body: parsed off the loop
    assert refused_then_pending(1) is False       # ~12 KB body: inline


def test_the_shared_thread_pool_is_bounded_by_the_compute_slots():
    """A worker's memory after an overload: the app's lifespan caps anyio's shared pool at
    max(8, 4 × slots) threads instead of 40; a 512-client overload had grown it to 51."""
    import anyio.to_thread
    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app, worker_threads
    from glassllm_service.settings import Settings

    for slots, threads in ((1, 8), (2, 8), (4, 16)):
        settings = Settings(max_concurrency=slots)
        assert worker_threads(settings) == threads
        with TestClient(create_app(settings)) as c:
            limiter = c.portal.call(anyio.to_thread.current_default_thread_limiter)
            assert limiter.total_tokens == threads


def test_take_free_grants_a_free_slot_at_once_and_never_jumps_the_queue():
    """`take_free` (run_admitted's path without the queue) grants only what
    `slot` would grant at once: a free slot in a lane where no one waits. With a waiter
    in the lane it returns None, so the caller queues behind, in its client's turn."""
    async def main():
        adm = admission(capacity=2)
        lane = adm.take_free(SMALL_COST)
        assert lane == SMALL and adm.busy == {SMALL: 1, LARGE: 0}
        assert adm.take_free(LARGE_COST) == LARGE        # capacity - 1 = 1 large slot
        assert adm.take_free(SMALL_COST) is None         # both slots held
        waiter = Holder(adm, "waiter", cost=SMALL_COST, client="w")
        await until(lambda: adm.waiting == 1)
        adm.release(SMALL)                               # the waiter gets it, not a newcomer
        await until(lambda: waiter.admitted)
        assert adm.take_free(SMALL_COST) is None and adm.waiting == 0
        waiter.release()
        await waiter.task
        adm.release(LARGE)
        assert adm.busy == {SMALL: 0, LARGE: 0} and adm.running == 0
        assert adm.take_free(LARGE_COST) == LARGE        # a large slot is free again
        assert adm.take_free(LARGE_COST) is None         # the last one stays for small work
        adm.release(LARGE)
    run(main())


def test_release_runs_on_release_and_hands_the_slot_to_the_next_in_line():
    async def main():
        released: list[int] = []
        adm = admission(capacity=1)
        adm.on_release = lambda: released.append(adm.running)
        lane = adm.take_free(SMALL_COST)
        waiter = Holder(adm, "next", cost=SMALL_COST)
        await until(lambda: adm.waiting == 1)
        adm.release(lane)
        assert released == [1]                  # the slot went straight to the waiter
        await until(lambda: waiter.admitted)
        waiter.release()
        await waiter.task
        assert released == [1, 0] and adm.running == 0
    run(main())


def test_the_lifespan_freezes_the_startup_objects_out_of_the_collector():
    """Each full collection walked the app, the registry and the libraries
    (36 ms, every few thousand small requests); after startup they are frozen."""
    import gc

    from fastapi.testclient import TestClient

    from glassllm_service.app import create_app

    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    with TestClient(create_app()) as c:
        assert gc.get_freeze_count() > 10_000
        assert c.get("/healthz").status_code == 200
    gc.unfreeze()
