"""The pattern of a wrong answer, named in words, never with an expected number.

A teacher who marks a gradient does not only say "wrong": the sign is flipped, it is off
by 1/N, it is the transpose, the broadcast was not summed back, the masked rows are
wrong. `find` looks for each in turn (the first that fits wins) and returns a `Pattern`:

========================  ==============================================================
``shape``                 not the expected shape (and none of the two below)
``transposed``            the expected array transposed (last two axes, or all)
``broadcast_not_summed``  the shape of a broadcast; summed back over its axes it is right
``nan_where_finite``      NaN where a finite number is due
``not_finite``            ±infinity where a finite number is due
``sign_flipped``          right, but for the sign of every element
``scaled``                right up to one constant factor (named when it is a simple one:
                          2, 1/2, N, 1/N, √N, 1/√N for each size N the exercise names)
``masked_wrong``          wrong exactly where a mask variable is true (or exactly where
                          it is false)
``some_rows_wrong``       wrong rows, the others right ("the masked ones" when a mask
                          picks the same rows)
``some_columns_wrong``    the same, by columns
``mostly_right``          a few elements wrong (at most a tenth)
``unrelated``             none of these
========================  ==============================================================

What a pattern says is built from shapes, positions and the factor's name: the expected
numbers never appear (the factor's value, which would give them back, only with
``reveal``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

__all__ = ["PATTERNS", "Pattern", "find"]

PATTERNS = ("shape", "transposed", "broadcast_not_summed", "nan_where_finite", "not_finite",
            "sign_flipped", "scaled", "masked_wrong", "some_rows_wrong",
            "some_columns_wrong", "mostly_right", "unrelated")
Agree = Callable[[np.ndarray, np.ndarray], np.ndarray]   # (expected, claimed) -> bool mask
MOSTLY = 0.1              # at most this fraction of the elements wrong: "mostly right"
SHOWN = 8                 # positions listed in a sentence


@dataclass(frozen=True)
class Pattern:
    """A named mistake: ``name`` (one of `PATTERNS`), ``says`` (a sentence for the
    student, with no expected number), ``details`` (JSON-ready: positions, the factor's
    name, the mask's name), ``factor_value`` (the measured factor; shown only with
    reveal, since it gives the expected numbers back)."""

    name: str
    says: str
    details: dict = field(default_factory=dict)
    factor_value: float | None = None

    def public(self, reveal: bool) -> dict:
        out = {"name": self.name, "says": self.says, **self.details}
        if reveal and self.factor_value is not None:
            out["factor_value"] = self.factor_value
        return out


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _all(agree: Agree, e: np.ndarray, c: np.ndarray) -> bool:
    return bool(np.all(agree(e, c)))


def _by_shape(e: np.ndarray, c: np.ndarray, agree: Agree) -> Pattern:
    """A claim of another shape: transposed, a broadcast not summed back, or just wrong."""
    if c.ndim >= 2 and c.shape == e.shape[:-2] + e.shape[-2:][::-1] \
            and _all(agree, e, np.swapaxes(c, -1, -2)):
        return Pattern("transposed", "the transpose of the expected array: swap its last"
                       " two axes", {"axes": [-2, -1]})
    if c.ndim >= 2 and c.shape == e.shape[::-1] and _all(agree, e, c.T):
        return Pattern("transposed", "the expected array with its axes reversed (.T)",
                       {"axes": "all"})
    try:
        broadcast = np.broadcast_shapes(e.shape, c.shape) == c.shape
    except ValueError:
        broadcast = False
    if broadcast and c.size > e.size:
        lead = c.ndim - e.ndim
        axes = tuple(range(lead)) + tuple(lead + k for k, n in enumerate(e.shape)
                                          if n == 1 and c.shape[lead + k] != 1)
        summed = c.sum(axis=axes, keepdims=True).reshape(e.shape)
        where = {"axes": list(axes)}
        if _all(agree, e, summed):
            return Pattern("broadcast_not_summed", f"shaped {_shape(c.shape)}, the broadcast"
                           f" output's shape: summed back over axes {list(axes)} it is"
                           f" right — the input was {_shape(e.shape)}, and its gradient is"
                           " the sum over the axes it was broadcast along", where)
        return Pattern("shape", f"shaped {_shape(c.shape)}, not {_shape(e.shape)}: that is"
                       " the broadcast output's shape; an input's gradient has the input's"
                       f" shape (sum over axes {list(axes)}), and even summed it is not"
                       " right", where)
    return Pattern("shape", f"shaped {_shape(c.shape)}, not {_shape(e.shape)}")


def _positions(mask: np.ndarray) -> list:
    return [list(map(int, i)) for i in np.argwhere(mask)[:SHOWN]]


def _named_factor(e: np.ndarray, c: np.ndarray, agree: Agree,
                  factors: Mapping[str, tuple[float, str]]) -> tuple[str, str] | None:
    """The simple factor `c` is of `e` — (its name, what the size is) — when one fits."""
    candidates: list[tuple[float, str, str]] = []
    for name, (size, says) in factors.items():
        root = f"√{name}" if len(name) == 1 else f"√({name})"
        shown = f"{name} = {says}, {size:g}"
        candidates += [(size, name, shown), (1 / size, f"1/{name}", shown),
                       (math.sqrt(size), root, shown), (1 / math.sqrt(size), f"1/{root}", shown)]
    candidates += [(2.0, "2", ""), (0.5, "1/2", "")]
    for sign, prefix in ((1.0, ""), (-1.0, "−")):
        for value, name, says in candidates:
            if _all(agree, e * (sign * value), c):
                return prefix + name, says
    return None


def _scaled(e: np.ndarray, c: np.ndarray, agree: Agree,
            factors: Mapping[str, tuple[float, str]]) -> Pattern | None:
    top = np.abs(e).max(initial=0.0)
    big = np.abs(e) > 1e-3 * top
    if top == 0 or not big.any():
        return None
    with np.errstate(all="ignore"):
        k = float(np.median(c[big] / e[big]))
    if not math.isfinite(k) or k == 0 or not _all(agree, e * k, c):
        return None
    named = _named_factor(e, c, agree, factors)
    if named is None:
        return Pattern("scaled", "off by one constant factor: every element is the expected"
                       " one times the same number (a missing or extra 1/N, 1/√d, 2?)",
                       {}, k)
    name, says = named
    what = f" ({says}): a factor missing or one too many?" if says else ""
    return Pattern("scaled", f"off by a constant factor: yours is {name} times the expected"
                   f" array{what}", {"factor": name}, k)


def _lines(wrong: np.ndarray, axis: int) -> np.ndarray | None:
    """The wrong lines along `axis` (-2: rows, -1: columns) when they hold the mistakes:
    some lines, not all, each mostly wrong, every other line right."""
    if wrong.ndim < 2:
        return None
    other = -1 if axis == -2 else -2
    lines = wrong.any(axis=other)
    share = wrong.mean(axis=other)
    if not lines.any() or lines.all() or (share[lines] < 0.5).any():
        return None
    return lines


def _by_position(e: np.ndarray, wrong: np.ndarray,
                 masks: Mapping[str, np.ndarray]) -> Pattern | None:
    for name, mask in masks.items():
        try:
            m = np.broadcast_to(mask, e.shape)
        except ValueError:
            m = None
        if m is not None and m.any() and not m.all():
            if np.array_equal(wrong, m):
                return Pattern("masked_wrong", f"wrong exactly at the positions the mask"
                               f" `{name}` marks (the masked ones), right everywhere else",
                               {"mask": name})
            if np.array_equal(wrong, ~m):
                return Pattern("masked_wrong", f"wrong exactly at the positions the mask"
                               f" `{name}` leaves open (the unmasked ones), right at the"
                               " masked ones", {"mask": name, "where": "unmasked"})
    for axis, kind in ((-2, "rows"), (-1, "columns")):
        lines = _lines(wrong, axis)
        if lines is None:
            continue
        which = _positions(lines) if lines.ndim > 1 else [int(i) for i in
                                                          np.flatnonzero(lines)[:SHOWN]]
        named = ""
        details: dict = {kind: which}
        for name, mask in masks.items():
            if mask.shape == lines.shape and np.array_equal(mask, lines):
                named, details["mask"] = f": the masked ones (`{name}`)", name
        count = int(lines.sum())
        return Pattern(f"some_{kind}_wrong", f"{count} of {lines.size} {kind} wrong{named}"
                       f" ({kind} {which}), the other {kind} right", details)
    return None


def find(expected: np.ndarray, claimed: np.ndarray, agree: Agree,
         masks: Mapping[str, np.ndarray] | None = None,
         factors: Mapping[str, tuple[float, str]] | None = None,
         ok: np.ndarray | None = None) -> Pattern | None:
    """The pattern of `claimed` against `expected` under the check `agree`; None when
    every element agrees. `masks`: the case's boolean variables; `factors`: the sizes
    the exercise names (``{"N": (4.0, "the batch size")}``); `ok`: `agree`'s verdict when
    the caller has it already."""
    e, c = np.asarray(expected, np.float64), np.asarray(claimed, np.float64)
    masks, factors = masks or {}, factors or {}
    if e.shape != c.shape:
        return _by_shape(e, c, agree)
    ok = agree(e, c) if ok is None else ok
    if ok.all():
        return None
    wrong = ~ok
    finite = np.isfinite(e)
    for name, bad, what in (("nan_where_finite", np.isnan(c), "NaN"),
                            ("not_finite", np.isinf(c), "±infinity")):
        hit = bad & finite
        if hit.any():
            return Pattern(name, f"{what} at {int(hit.sum())} of {e.size} elements where a"
                           f" finite number is due (positions {_positions(hit)})",
                           {"positions": _positions(hit), "count": int(hit.sum())})
    if _all(agree, e, -c) and np.abs(e).max(initial=0) > 0:
        return Pattern("sign_flipped", "right but for the sign: every element has the"
                       " opposite sign (a minus lost, or g - out for out - g?)")
    scaled = _scaled(e, c, agree, factors)
    if scaled is not None:
        return scaled
    found = _by_position(e, wrong, masks)
    if found is not None:
        return found
    count = int(wrong.sum())
    if count <= MOSTLY * e.size:
        return Pattern("mostly_right", f"{count} of {e.size} elements wrong (positions"
                       f" {_positions(wrong)}), the rest right", {"positions":
                                                                  _positions(wrong)})
    zeros = " (yours is all zeros)" if not np.any(c) else ""
    return Pattern("unrelated", f"{count} of {e.size} elements wrong, with no simple pattern"
                   f"{zeros}: check the derivation step by step")
