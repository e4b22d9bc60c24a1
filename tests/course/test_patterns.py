"""Each mistake pattern is named, in words, with no expected number in what the student
sees when the expected numbers are hidden (docs/exercises.md#the-pattern-of-a-mistake)."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from glassllm.course import build_case, grade
from glassllm.course.exercise import SHIPPED, load_dir
from glassllm.course.patterns import PATTERNS

RNG = np.random.default_rng(7)
E = RNG.normal(size=(4, 6)) + 0.1                 # the expected gradient, (N, d) = (4, 6)
MASK = np.zeros((4, 6), dtype=bool)
MASK[1:3, 2:5] = True                             # scattered: neither rows nor columns
ROWS = np.array([False, True, False, True])
CONTEXT = {"masks": {"mask": MASK},
           "factors": {"N": (4.0, "the batch size"), "d": (6.0, "the width")}}


def off(where, by=0.37):
    """E with the elements at `where` moved well off."""
    return np.where(where, E + by, E)


CLAIMS = {
    "shape": (E[:, :5], None),
    "transposed": (E.T, None),
    "broadcast_not_summed": (np.broadcast_to(E[0] / 3, (3, 6)) * 1.0, "bias"),
    "nan_where_finite": (np.where(MASK, np.nan, E), None),
    "not_finite": (np.where(MASK, np.inf, E), None),
    "sign_flipped": (-E, None),
    "scaled": (E * 4, "1/N"),
    "masked_wrong": (off(MASK), None),
    "some_rows_wrong": (off(ROWS[:, None] & np.ones((1, 6), bool)), None),
    "some_columns_wrong": (off(np.arange(6) == 3), None),
    "mostly_right": (off((np.arange(24) == 5).reshape(4, 6)), None),
    "unrelated": (RNG.normal(size=(4, 6)), None),
}


def no_expected_number(public: dict, expected: np.ndarray) -> bool:
    text = orjson.dumps(public).decode()
    return not any(repr(float(x)) in text or f"{x:.4g}" in text for x in expected.ravel())


def test_every_pattern_is_tested():
    assert set(CLAIMS) == set(PATTERNS)


@pytest.mark.parametrize("name", list(CLAIMS))
def test_each_pattern_is_named_and_said_without_expected_numbers(name):
    claimed, _ = CLAIMS[name]
    expected = np.broadcast_to(E[0], (6,)).copy() if name == "broadcast_not_summed" else E
    if name == "broadcast_not_summed":
        claimed = np.broadcast_to(expected / 3, (3, 6)).copy()
    v = grade(expected, claimed, digits=4, context=CONTEXT)
    assert not v.passed
    assert v.pattern.name == name, (v.pattern.name, v.pattern.says)
    assert v.pattern.says
    for level in ("digits+pattern", "pattern"):
        public = v.public(level, reveal=False)
        assert public["pattern"]["name"] == name
        assert no_expected_number(public, expected), public
    assert "expected" in v.public("pattern", reveal=True)


def test_the_factor_is_named_when_it_is_a_simple_one():
    said = grade(E, E / 4, context=CONTEXT).pattern
    assert (said.name, said.details["factor"]) == ("scaled", "1/N")
    assert "N = the batch size, 4" in said.says
    assert grade(E, E * np.sqrt(6), context=CONTEXT).pattern.details["factor"] == "√d"
    assert grade(E, E / np.sqrt(6), context=CONTEXT).pattern.details["factor"] == "1/√d"
    # a named size wins over a bare 2 (attention's √dk with dk = 4 is named √dk)
    assert grade(E, E * 2, context=CONTEXT).pattern.details["factor"] == "√N"
    assert grade(E, E * 2, context={"factors": {"d": (6.0, "w")}}).pattern.details[
        "factor"] == "2"
    assert grade(E, -E / 4, context=CONTEXT).pattern.details["factor"] == "−1/N"


def test_a_factor_that_is_not_simple_is_not_given_unless_revealed():
    v = grade(E, E * 1.37, context=CONTEXT)
    assert v.pattern.name == "scaled" and "factor" not in v.pattern.details
    assert "factor_value" not in v.public("digits+pattern")["pattern"]
    assert v.public("digits+pattern", reveal=True)["pattern"]["factor_value"] == \
        pytest.approx(1.37)
    assert no_expected_number(v.public("digits+pattern"), E)


def test_the_masked_rows_are_named_as_the_masked_ones():
    v = grade(E, off(ROWS[:, None] & np.ones((1, 6), bool)),
              context={"masks": {"pad_rows": ROWS}})
    assert v.pattern.name == "some_rows_wrong" and v.pattern.details["mask"] == "pad_rows"
    assert "the masked ones" in v.pattern.says and v.pattern.details["rows"] == [1, 3]
    unmasked = grade(E, off(~MASK), context={"masks": {"mask": MASK}}).pattern
    assert unmasked.name == "masked_wrong" and unmasked.details["where"] == "unmasked"


def test_the_shipped_exercises_name_their_classic_mistakes():
    exercises = {ex.id: ex for ex in load_dir(SHIPPED)}

    def pattern(exercise, answer, claimed):
        case = build_case(exercises[exercise], "ada")
        v = grade(case.expected[answer], claimed(case), digits=exercises[exercise].digits,
                  context={"masks": case.masks, "factors": case.factors})
        return v.pattern

    # cross-entropy without the mean's 1/N
    p = pattern("softmax-ce-logits", "logits", lambda c: c.expected["logits"] * 4)
    assert (p.name, p.details["factor"]) == ("scaled", "N")
    # attention's backward without the 1/sqrt(dk) of the forward
    p = pattern("attention-scale", "q", lambda c: c.expected["q"] * 2)
    assert p.details["factor"] == "√(dk)" and "dk = the key width, 4" in p.says
    # a bias gradient left one per row
    p = pattern("broadcast-bias", "b", lambda c: c.grad_output)
    assert p.name == "broadcast_not_summed"
    # softmax's gradient where the mask blocks: must be 0
    p = pattern("masked-softmax", "scores",
                lambda c: np.where(c.masks["mask"], 0.25, c.expected["scores"]))
    assert (p.name, p.details["mask"]) == ("masked_wrong", "mask")
