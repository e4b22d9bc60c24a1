"""The check a hand derivation can pass: an element agrees to N digits when it is off by at
most one unit in the N-th significant digit of the expected number (docs/exercises.md).
Tested on numbers whose (N-1)-digit form is at least two units off in digit N: the
stated digits pass (rounded or truncated), one fewer fails; round-off zeros pass."""

from __future__ import annotations

import math

import numpy as np
import orjson
import pytest

from glassllm.course.verdict import Rule, agrees, digits_agreed, grade


def significant(x: float, n: int) -> float:
    """x rounded to n significant digits."""
    return float(f"{x:.{n - 1}e}")


def truncated(x: float, n: int) -> float:
    """x cut (towards zero) after n significant digits."""
    k = math.floor(math.log10(abs(x))) - n + 1
    return math.trunc(x / 10.0**k) * 10.0**k


def unit(x: float, n: int) -> float:
    """One unit in the n-th significant digit of x."""
    return 10.0 ** (math.floor(math.log10(abs(x))) - n + 1)


def sample(seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    mantissas = rng.uniform(1, 10, 4000) * rng.choice([-1, 1], 4000)
    return list(mantissas * 10.0 ** rng.integers(-8, 8, 4000))


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8])
def test_n_digits_pass_and_n_minus_one_digits_fail(n):
    # numbers whose (N-1)-digit form is at least two units off in digit N
    e = np.array([x for x in sample(n) if abs(significant(x, n - 1) - x) >= 2 * unit(x, n)])
    assert e.size > 1000                 # every decade, every leading digit, both signs
    rule = Rule(digits=n)
    for x in e:                          # one number at a time: its own scale
        assert agrees([x], [significant(x, n)], rule)[0], (x, n)
        assert agrees([x], [truncated(x, n)], rule)[0], (x, n)
        assert not agrees([x], [significant(x, n - 1)], rule)[0], (x, n)
    assert digits_agreed(e[:1], [significant(e[0], n - 1)])[0] < n


def test_a_number_starting_with_a_nine_is_held_to_its_own_digit():
    # with the scale |e| itself, 0.988 would agree to 4 digits of 0.98765 (3.5 units off)
    assert grade([0.98765], [0.9877], digits=4).passed
    assert grade([0.98765], [0.9876], digits=4).passed
    assert not grade([0.98765], [0.988], digits=4).passed
    assert digits_agreed([0.98765], [0.988]).tolist() == [3.0]


def test_round_off_zeros_pass_as_zero():
    expected = np.array([[1.0, 1.2e-17], [-3.0e-18, -0.5]])
    claimed = np.array([[1.0, 0.0], [0.0, -0.5]])
    for n in (4, 8, 12):
        assert grade(expected, claimed, digits=n).passed
    # a real miss of the same small size beside large numbers is a miss at high digits
    assert not grade([1.0, 2.3e-4], [1.0, 0.0], digits=4).passed


def test_an_all_zero_array_is_read_on_the_scale_one():
    assert grade([0.0, 0.0], [1e-5, -2e-5], digits=4).passed
    assert not grade([0.0, 0.0], [1e-5, -2e-5], digits=6).passed


def test_digits_agreed_per_element():
    d = digits_agreed([0.12345, 2.0, 1.0, np.inf, np.nan, 5.0], [0.1234, 2.0, np.nan, np.inf,
                                                                  np.nan, -5.0])
    assert d.tolist() == [4.0, math.inf, 0.0, math.inf, math.inf, 0.0]


def test_non_finite_numbers_agree_only_with_themselves():
    r = Rule(digits=4)
    assert agrees([np.inf, -np.inf, np.nan], [np.inf, -np.inf, np.nan], r).all()
    assert not agrees([np.inf, 1.0], [-np.inf, np.inf], r).any()


def test_atol_and_rtol_are_numpys_isclose():
    rng = np.random.default_rng(0)
    e = rng.normal(size=500)
    c = e + rng.normal(scale=1e-5, size=500)
    for atol, rtol in ((1e-8, 1e-5), (1e-6, 0.0), (0.0, 1e-4)):
        np.testing.assert_array_equal(agrees(e, c, Rule(None, atol, rtol)),
                                      np.isclose(c, e, rtol=rtol, atol=atol, equal_nan=True))
    assert grade(e, c, atol=1e-3).passed and grade(e, c, atol=1e-3).rule.public() == {
        "atol": 1e-3, "rtol": 1e-5}


def test_a_rule_is_digits_or_tolerances():
    with pytest.raises(ValueError):
        Rule(digits=4, atol=1e-3)
    with pytest.raises(ValueError):
        Rule(digits=0)


def test_feedback_levels_show_what_they_allow_and_reveal_only_when_asked():
    v = grade([[0.5, -0.25]], [[0.5, 0.25]], digits=4)
    full = v.public("digits+pattern")
    assert full["agree"] == [[True, False]] and full["digits"] == [["Infinity", 0.0]]
    assert full["pattern"]["name"] and "expected" not in full
    pattern = v.public("pattern")
    assert "digits" not in pattern and pattern["agree"] == [[True, False]] and pattern["pattern"]
    assert v.public("pass/fail") == {"passed": False, "rule": {"digits": 4}}
    assert v.public("pattern", reveal=True)["expected"] == [[0.5, -0.25]]
    orjson.dumps(full)                                        # JSON-ready
    with pytest.raises(ValueError):
        v.public("everything")


def test_a_wrong_shape_fails_without_a_per_element_verdict():
    v = grade(np.zeros((2, 3)), np.zeros((3, 2)))
    assert not v.passed and v.agree is None and v.pattern.name in ("shape", "transposed")
