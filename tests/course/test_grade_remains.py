"""What the grader cannot tell apart from a derivation, shown to be what docs/integrity.md
says it is ("What remains, and what to do about it"): it checks numbers, not how they
were made. Finite differences of the student's own forward pass, an autograd written
inside the submission, and another person's code all score as a derivation would; the
mitigations the doc names (more digits, edge cases where finite differences fail) are
shown to work on the first."""

from __future__ import annotations

import numpy as np
import pytest

from glassllm.course.exercise import SHIPPED
from glassllm.course.grader import grade_submission
from glassllm.course.grader.kinds import case_inputs

RMS = SHIPPED / "rmsnorm-backward.toml"
RIGHT = '''
import numpy as np

def rms_norm_backward(x, weight, g):
    d = x.shape[-1]
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
    gw = g * weight
    return (gw * r - x * r**3 * np.sum(gw * x, axis=-1, keepdims=True) / d,
            np.sum(g * x * r, axis=tuple(range(x.ndim - 1))))
'''
FINITE_DIFFERENCES = '''
import numpy as np

H = {h}

def forward(x, weight):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * weight

def central(f, a, g):
    grad = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        up, down = a.copy(), a.copy()
        up[i] += H
        down[i] -= H
        grad[i] = np.sum(g * (f(up) - f(down))) / (2 * H)
    return grad

def rms_norm_backward(x, weight, g):
    return (central(lambda a: forward(a, weight), x, g),
            central(lambda w: forward(x, w), weight, g))
'''
AUTOGRAD = '''
import numpy as np

class T:
    """A reverse-mode autograd of a few lines, inside the submission."""
    def __init__(self, value, parents=()):
        self.value, self.parents = np.asarray(value, dtype=float), parents
        self.grad = np.zeros_like(self.value)

    def __mul__(self, other):
        return T(self.value * other.value,
                 ((self, lambda g: g * other.value), (other, lambda g: g * self.value)))

    def mean_last(self):
        n = self.value.shape[-1]
        return T(self.value.mean(axis=-1, keepdims=True),
                 ((self, lambda g: np.broadcast_to(g / n, self.value.shape)),))

    def rsqrt(self, eps):
        out = (self.value + eps) ** -0.5
        return T(out, ((self, lambda g: g * -0.5 * out ** 3),))

    def backward(self, g):
        order, seen = [], set()
        def visit(t):
            if id(t) not in seen:
                seen.add(id(t))
                for parent, _ in t.parents:
                    visit(parent)
                order.append(t)
        visit(self)
        self.grad = g
        for t in reversed(order):
            for parent, rule in t.parents:
                parent.grad = parent.grad + unbroadcast(rule(t.grad), parent.value.shape)

def unbroadcast(g, shape):
    while g.ndim > len(shape):
        g = g.sum(axis=0)
    return g.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)

def rms_norm_backward(x, weight, g):
    tx, tw = T(x), T(weight)
    out = tx * (tx * tx).mean_last().rsqrt(1e-6) * tw
    out.backward(g)
    return tx.grad, tw.grad
'''


def _grade(tmp_path, source, exercise=RMS, student="ada"):
    path = tmp_path / f"{student}.py"
    path.write_text(source)
    return grade_submission(exercise, path, student, budget=20)


def _more_digits(tmp_path, digits: int):
    path = tmp_path / f"rms-{digits}.toml"
    path.write_text(RMS.read_text().replace("digits = 6", f"digits = {digits}"))
    return path


def test_finite_differences_pass_at_six_digits_and_fail_at_ten(tmp_path):
    """Central differences of the student's own forward, with a well-chosen step, agree
    to 6 significant digits on every case (full marks: the grader cannot tell); at 10
    digits no step does, while the derivation still gets every point."""
    fd = FINITE_DIFFERENCES.format(h="1e-6")
    assert _grade(tmp_path, fd).score == 10.0
    ten = _more_digits(tmp_path, 10)
    assert _grade(tmp_path, RIGHT, ten).score == 10.0
    for h in ("1e-4", "1e-5", "1e-6", "1e-7"):
        assert _grade(tmp_path, FINITE_DIFFERENCES.format(h=h), ten).score < 10.0, h


def test_a_row_of_zeros_defeats_finite_differences_of_the_usual_steps(tmp_path):
    """The edge case where finite differences fail: on a row of zeros the curvature of
    1/sqrt(mean(x²) + eps) is eps's, so a step of 1e-5 or more misses dx there (and only
    there) at the exercise's 6 digits."""
    for h in ("1e-3", "1e-4", "1e-5"):
        report = _grade(tmp_path, FINITE_DIFFERENCES.format(h=h))
        zeros = next(t for t in report.tests if t.name == "a row of zeros")
        assert zeros.verdicts["dx"]["passed"] is False, h
        assert zeros.verdicts["dweight"]["passed"] is True, h


def test_an_autograd_written_inside_the_submission_scores_as_a_derivation_does(tmp_path):
    """Forty lines of reverse mode inside the submission get every point, at the
    exercise's digits and at 10 (where finite differences fail): more digits do not
    tell it apart; a graded session or a review of the code does."""
    assert _grade(tmp_path, AUTOGRAD).score == 10.0
    assert _grade(tmp_path, AUTOGRAD, _more_digits(tmp_path, 10)).score == 10.0


@pytest.mark.parametrize("student", ["bob", "cy"])
def test_another_persons_code_scores_on_anyones_numbers(tmp_path, student):
    """Per-student numbers make a shared answer wrong for anyone else, not shared code:
    ada's function gets every point on a classmate's own (different) numbers."""
    from glassllm.course.exercise import load

    ex = load(RMS)
    ada = case_inputs(ex, "ada", "glassllm-practice")[0][1]["x"]
    theirs = case_inputs(ex, student, "glassllm-practice")[0][1]["x"]
    assert ada.shape == theirs.shape and not np.allclose(ada, theirs)
    assert _grade(tmp_path, RIGHT, student="ada").score == 10.0
    assert _grade(tmp_path, RIGHT, student=student).score == 10.0
