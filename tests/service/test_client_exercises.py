"""`Sandbox.exercise`, `.submit`, `.hint` against a real sandbox: a notebook does what the
page does and gets the same verdicts; a function is submitted as itself, run on every case."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from glassllm.client import AsyncSandbox, NotFoundError, Sandbox
from glassllm.course import build_case
from glassllm.course.exercise import SHIPPED, load

pytestmark = pytest.mark.slow


def rms_norm_backward(x, weight, g, eps=1e-6):
    d = x.shape[-1]
    r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    dx = weight * g * r - x * r**3 * (g * weight * x).sum(axis=-1, keepdims=True) / d
    return dx, (g * x * r).reshape(-1, d).sum(axis=0)


def forgot_the_mean(x, weight, g, eps=1e-6):
    """A classic slip: the second term without its 1/d."""
    d = x.shape[-1]
    dx, dweight = rms_norm_backward(x, weight, g, eps)
    r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return dx - x * r**3 * (g * weight * x).sum(axis=-1, keepdims=True) * (1 - 1 / d), dweight


def test_a_notebook_gets_its_numbers_submits_and_asks_for_hints(url):
    with Sandbox(url) as sb:
        assert "softmax-ce-logits" in {e["id"] for e in sb.exercises()}
        ex = sb.exercise("softmax-ce-logits", student="ada")
        case = build_case(load(SHIPPED / "softmax-ce-logits.toml"), "ada")
        np.testing.assert_array_equal(ex.variables["logits"], case.variables["logits"])
        assert ex.variables["targets"].dtype.kind == "i"
        assert ex.answers[0]["key"] == "logits" and "### " in ex._repr_markdown_()
        wrong = sb.submit("softmax-ce-logits", {"logits": case.expected["logits"] * 4},
                          student="ada")
        assert not wrong.passed and wrong.answers["logits"]["pattern"]["factor"] == "N"
        assert wrong.answers["logits"]["agree"].dtype == bool
        right = sb.submit("softmax-ce-logits", {"logits": case.expected["logits"]}, student="ada")
        assert right.passed and right.score == 5.0 and "passed" in right._repr_markdown_()
        assert (right.answers["logits"]["digits"] == np.inf).all()
        assert sb.hint("softmax-ce-logits", student="ada")["number"] == 1
        assert sb.hint("softmax-ce-logits", 2)["text"].startswith("For one row")
        with pytest.raises(NotFoundError) as info:
            sb.exercise("no-such-exercise")
        assert info.value.code == "unknown_exercise"


def test_a_function_is_submitted_as_itself_and_graded_on_every_case(url):
    with Sandbox(url) as sb:
        ex = sb.exercise("rmsnorm-backward", student="ada")
        assert [name for name, _ in ex.cases()] == ["generated", "a row of zeros", "a large row"]
        good = sb.submit("rmsnorm-backward", function=rms_norm_backward, student="ada")
        assert good.passed and good.missing == [] and len(good.answers) == 6
        bad = sb.submit("rmsnorm-backward", function=forgot_the_mean, student="ada")
        assert not bad.passed
        assert not bad.answers["generated/dx"]["passed"] and bad.answers["generated/dweight"][
            "passed"]
        assert bad.answers["a row of zeros/dx"]["passed"] is False
        with pytest.raises(ValueError, match="returned 1 arrays"):
            sb.submit("rmsnorm-backward", function=lambda x, w, g: (x,))
        with pytest.raises(ValueError, match="not a function"):
            sb.submit("softmax-ce-logits", function=rms_norm_backward)


def test_the_async_client_gives_the_same_verdicts(url):
    async def go():
        async with AsyncSandbox(url) as sb:
            ex = await sb.exercise("masked-softmax", student="ada")
            v = await sb.submit("masked-softmax", {"scores": np.zeros((3, 3))}, student="ada")
            return ex, v

    ex, v = asyncio.run(go())
    assert ex.grad_output.shape == (3, 3) and ex.variables["mask"].dtype == bool
    assert not v.passed and v.answers["scores"]["pattern"]["name"]


def test_check_takes_digits_from_the_client(url):
    with Sandbox(url) as sb:
        r = sb.check("softmax", {"a": [[1.0, 2.0, 3.0]]}, value=[[0.09003, 0.2447, 0.6652]],
                     digits=4)
        assert r["passed"] and r["digits"] == 4
        r = sb.check("softmax", {"a": [[1.0, 2.0, 3.0]]}, value=[[0.09003, 0.2447, 0.6652]])
        assert not r["passed"]                       # rtol 1e-5: four digits are not enough
