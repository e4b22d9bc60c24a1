"""The client's arguments, checked on this side: a wrong one is a TypeError / ValueError
naming it (an id too long for a URL the client's `InvalidURLError`), raised before any
request by `Sandbox` and `AsyncSandbox` alike (docs/client.md); stubbed transports
(httpx.MockTransport) that record every request. The live refusals are in
test_client_mysteries.py."""

from __future__ import annotations

import asyncio
import re

import httpx
import numpy as np
import pytest

from glassllm.apps import client as gc
from glassllm.apps.client import AsyncSandbox, InvalidURLError, Sandbox, SandboxError


def _stub():
    calls: list[httpx.Request] = []
    return httpx.MockTransport(lambda r: calls.append(r) or httpx.Response(200, json={})), calls


LONG = "a" * 70_000                    # past httpx's 65536-character URL


def answers_with(value):
    return lambda *_: value


REFUSED = [
    # an id, name or student too long for a URL: httpx.InvalidURL is no httpx.HTTPError
    *[(call, InvalidURLError, "URL too long") for call in (
        lambda sb: sb.mystery(LONG), lambda sb: sb.mystery_eval(LONG),
        lambda sb: sb.mystery_eval(LONG, "x.sum()", {"x": [1.0]}),
        lambda sb: sb.prove(LONG, 1), lambda sb: sb.op(LONG, {"a": 1.0}),
        lambda sb: sb.exercise(LONG), lambda sb: sb.submit(LONG, {"a": [1.0]}),
        lambda sb: sb.hint(LONG), lambda sb: sb.hint("e", student=LONG),
        lambda sb: sb.mystery_eval("m", "x.sum()", {"x": [1.0]}, student=LONG))],
    # values JSON cannot carry: named where they are, not the encoder's bare TypeError
    (lambda sb: sb.prove("m", 2**64), ValueError, "node is 18446744073709551616, outside int64"),
    (lambda sb: sb.prove("m", np.uint64(2**64 - 1)), ValueError, "node is .* outside int64"),
    (lambda sb: sb.prove("m", 5, {"x": object()}), TypeError, r"variables\['x'\] must be"),
    (lambda sb: sb.mystery_eval("m", variables={"x": object()}), TypeError,
     r"variables\['x'\] must be"),
    (lambda sb: sb.mystery_eval("m", "x.sum()", {"x": [1.0, 2**64]}), ValueError,
     r"variables\['x'\]\[1\] is .* outside int64"),
    (lambda sb: sb.eval("x.sum()", {"x": object()}), TypeError, r"variables\['x'\] must be"),
    (lambda sb: sb.eval("x.sum()", {"x": 1.0}, [object()]), TypeError,
     r"grad_output\[0\] must be"),
    (lambda sb: sb.eval("x.sum()", {"x": 1.0}, check={"modes": object()}), TypeError,
     r"check\['modes'\] must be"),
    (lambda sb: sb.op("mul", {"a": [1.0, object()], "b": 1.0}), TypeError,
     r"inputs\['a'\]\[1\] must be"),
    (lambda sb: sb.op("mul", {"a": 2**64, "b": 1.0}), ValueError, r"inputs\['a'\] is"),
    (lambda sb: sb.op("mul", {"a": 1.0}, ["a", "\ud800"]), ValueError,
     r"requires_grad\[1\] is not valid text"),
    (lambda sb: sb.check("mul", {"a": 1.0, "b": 1.0}, grads={"a": {1}}), TypeError,
     r"grads\['a'\] must be"),
    (lambda sb: sb.check("mul", {"a": 1.0, "b": 1.0}, value=1.0, rtol=2**70), ValueError,
     "rtol is .* outside int64"),
    (lambda sb: sb.batch([{"op": "neg", "inputs": {"a": object()}}]), TypeError,
     r"cases\[0\]\['inputs'\]\['a'\] must be"),
    (lambda sb: sb.submit("e", {"dx": [1.0, object()]}), TypeError, r"answers\['dx'\] must be"),
    (lambda sb: sb.hint("e", 2**64), ValueError, "number is .* outside int64"),
    # an empty id or name would ask for the list route (a 307 to it): refused, named
    *[(call, ValueError, f"{name} must not be empty") for name, call in (
        ("mystery_id", lambda sb: sb.mystery("")), ("mystery_id", lambda sb: sb.mystery_eval("")),
        ("mystery_id", lambda sb: sb.mystery_eval("", "x.sum()", {"x": [1.0]})),
        ("mystery_id", lambda sb: sb.prove("", 1)), ("exercise_id", lambda sb: sb.exercise("")),
        ("exercise_id", lambda sb: sb.submit("", {"a": [1.0]})),
        ("exercise_id", lambda sb: sb.submit("", function=answers_with(1.0))),
        ("exercise_id", lambda sb: sb.hint("")), ("name", lambda sb: sb.op("", {"a": 1.0})))],
    *[(call, TypeError, f"{name} must be a string") for name, call in (
        ("mystery_id", lambda sb: sb.mystery(None)), ("mystery_id", lambda sb: sb.mystery(5)),
        ("exercise_id", lambda sb: sb.exercise(5)), ("exercise_id", lambda sb: sb.hint(["e"])),
        ("name", lambda sb: sb.op(5, {"a": 1.0})))],
    # flags are True / False and a student id a string, everywhere
    *[(call, TypeError, f"{name} must be True or False") for name, call in (
        ("dead", lambda sb: sb.eval("x.sum()", {"x": 1.0}, dead="yes")),
        ("dead", lambda sb: sb.eval("x.sum()", {"x": 1.0}, dead=1)),
        ("paths", lambda sb: sb.eval("x.sum()", {"x": 1.0}, paths="x")),
        ("dead", lambda sb: sb.mystery_eval("m", dead="yes")),       # before the case's GET
        ("paths", lambda sb: sb.mystery_eval("m", "x.sum()", {"x": 1.0}, paths=0)),
        ("reveal", lambda sb: sb.submit("e", {"a": [1.0]}, reveal="yes")),
        ("reveal", lambda sb: sb.submit("e", function=answers_with(1.0), reveal=1)),
        ("reveal", lambda sb: sb.check("mul", {"a": 1.0, "b": 1.0}, value=1.0, reveal="no")))],
    (lambda sb: sb.eval("x.sum()", {"x": 1.0}, check="yes"), TypeError, "check must be"),
    *[(call, TypeError, "student must be a string") for call in (
        lambda sb: sb.mystery_eval("m", student=5),
        lambda sb: sb.mystery_eval("m", "x.sum()", {"x": 1.0}, student=5),
        lambda sb: sb.prove("m", 1, student=5), lambda sb: sb.exercise("e", student=5),
        lambda sb: sb.submit("e", {"a": [1.0]}, student=5),
        lambda sb: sb.submit("e", function=answers_with(1.0), student=5),
        lambda sb: sb.hint("e", student=True))],
    (lambda sb: sb.hint("e", "2"), TypeError, "number must be an integer"),
    (lambda sb: sb.submit("e", function=5), TypeError, "function must be a function"),
    (lambda sb: sb.submit("e", {"a": [1.0]}, idempotency_key=5), TypeError,
     "idempotency_key must be a string"),
    (lambda sb: sb.mystery_eval("m", encoding="binary"), ValueError, "encoding must be"),
]


@pytest.mark.parametrize("call, exc, match", REFUSED)
def test_a_wrong_argument_is_refused_before_any_request_naming_it(call, exc, match):
    """The client's promise: a wrong argument is a TypeError / ValueError naming it (an id
    too long for any URL the client's `InvalidURLError`, a SandboxError and a ValueError),
    raised before anything is sent, by `Sandbox` and `AsyncSandbox` alike; never an httpx
    exception, the JSON encoder's error naming nothing, or a redirect's BadAnswerError."""
    transport, calls = _stub()
    with Sandbox("http://sandbox", transport=transport) as sb, \
            pytest.raises(exc, match=match) as sync_error:
        call(sb)

    async def go():
        async with AsyncSandbox("http://sandbox", transport=transport) as asb:
            with pytest.raises(exc, match=match) as async_error:
                await call(asb)
            return async_error
    unaddressed = lambda e: re.sub(r" at 0x[0-9a-f]+", "", str(e.value))  # noqa: E731
    assert unaddressed(asyncio.run(go())) == unaddressed(sync_error)
    assert calls == []
    if exc is InvalidURLError:
        assert isinstance(sync_error.value, SandboxError | ValueError)
        assert sync_error.value.code == "invalid_url" and len(sync_error.value.url) < 300


def test_torch_tensors_and_numpy_scalars_still_travel_exactly():
    """`to_wire` refuses what JSON cannot carry, and still takes anything with __array__
    and NumPy scalars: as numbers, exactly."""

    class Tensorish:
        def __array__(self, dtype=None, copy=None):
            return np.array([0.1, -0.0])
    wire = gc.to_wire({"a": Tensorish(), "b": np.float32(0.5), "c": np.int64(-(2**63)),
                       "d": [np.nan, True, None, "..."]})
    assert wire == {"a": [0.1, -0.0], "b": 0.5, "c": -(2**63), "d": ["NaN", True, None, "..."]}
