"""A wrong type of argument to the client is a TypeError naming the argument, raised
before any request (a transport that fails the test if it is ever called); and a Sandbox
prints where it talks to, never its token."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from glassllm.client import AsyncSandbox, Sandbox


def never(request):
    raise AssertionError(f"no request should be sent: {request.url}")


@pytest.fixture
def sb():
    with Sandbox("http://sandbox.test", transport=httpx.MockTransport(never)) as s:
        yield s


@pytest.mark.parametrize("call, named", [
    (lambda sb: sb.op(3, {"a": [1.0]}), "name"),
    (lambda sb: sb.op("softmax", [[1.0, 2.0]]), "inputs"),
    (lambda sb: sb.op("softmax", {"a": [1.0]}, requires_grad="a"), "requires_grad"),
    (lambda sb: sb.op("softmax", {"a": [1.0]}, grad_output="ones"), "grad_output"),
    (lambda sb: sb.eval(["x.sum()"]), "expression"),
    (lambda sb: sb.eval("x.sum()", [("x", 1.0)]), "variables"),
    (lambda sb: sb.eval("x.sum()", {"x": 1.0}, check="yes"), "check"),
    (lambda sb: sb.check(op="softmax", inputs={"a": [1.0]}, value="1.0"), "value"),
    (lambda sb: sb.check(op="softmax", inputs={"a": [1.0]}, digits=4.5), "digits"),
    (lambda sb: sb.check(op="softmax", inputs={"a": [1.0]}, rtol="1e-5"), "rtol"),
    (lambda sb: sb.check(op="softmax", inputs={"a": [1.0]}, reveal="no"), "reveal"),
    (lambda sb: sb.batch(["softmax"]), "a batch's case"),
])
def test_a_wrong_type_is_a_type_error_naming_the_argument(sb, call, named):
    with pytest.raises(TypeError, match=f"^{named} must be"):
        call(sb)


def test_right_types_still_pass_the_check():
    seen = []

    def answer(request):
        seen.append(request.url.path)
        return httpx.Response(200, json={"value": [1.0], "grads": {"a": [0.0]}, "warnings": []})
    with Sandbox("http://sandbox.test", transport=httpx.MockTransport(answer)) as sb:
        r = sb.op("softmax", {"a": np.array([1.0])}, requires_grad=("a",),
                  grad_output=np.float64(1.0))
    assert seen == ["/api/v1/ops/softmax"] and r.value.tolist() == [1.0]


def test_a_sandbox_says_where_it_talks_never_its_token():
    with Sandbox("http://127.0.0.1:8000/", token="s3cret") as sb:
        assert repr(sb) == "Sandbox('http://127.0.0.1:8000', token=…, timeout=30)"
    assert repr(AsyncSandbox("http://h:1", timeout=5)) == "AsyncSandbox('http://h:1', timeout=5)"
