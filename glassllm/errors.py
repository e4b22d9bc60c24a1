"""One error family for every refusal of bad input (SPEC H4).

`InputError` is a ValueError, as NumPy's own errors are (L0.4), that names the input to
fix in ``.input``. Its kinds say which rule was broken:

- `WireError`: a value that does not fit its input's kind (a ragged list, a float id);
- `ShapeError`: shapes (or a head count) that break an op's documented contract;
- `LimitError`: a request that would exceed a size limit (`glassllm.sandbox.limits.Limits`);
- `ComputeError`: NumPy refused the computation (a broadcast, an axis, an index);
- `ExprError` (`glassllm.sandbox.expr`): the expression language, with the offending position.

The library knows no HTTP: the service maps each kind to one status, once
(`glassllm_service.http_errors`). A class that derives from two kinds (an expression's
limit is an `ExprError` and a `LimitError`) takes the status of the first kind the service
maps.

The checks at the library's doors live here too (`check_int`, `check_real`, `id_array`):
a boundary that converts silently (``int(104.9)`` is 104, ``True`` is 1, a uint8 id array
overflows in ``id % 256``) hides a caller's mistake, so these refuse such input with a
TypeError or ValueError that names the input, and the first bad element with its position
and value; accepted ids come back as ``np.intp``, the platform's index type, whatever
integer dtype they arrived in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["ComputeError", "InputError", "LimitError", "ShapeError", "WireError", "check_int",
           "check_real", "echo_name", "id_array", "op_message"]

NAME_ECHO = 40          # characters of a user-supplied name an error repeats


def echo_name(name: object, limit: int = NAME_ECHO) -> str:
    """A user-supplied name (an unknown input, field or op, a requires_grad entry) as an error
    may repeat it, in its message and its ``input``: at most `limit` characters, then "…".

    A request may carry a name of any length (200 000 characters fit in the body limit);
    repeating it whole would make the error as large as the request (H4: the error names
    the input — its first characters are enough to find it).
    """
    text = str(name)
    return text if len(text) <= limit else text[:limit] + "…"


class InputError(ValueError):
    """Bad input: ``.input`` names the argument (or request field) to fix; str() says why.

    ``code`` is a stable machine-readable name of the rule broken (the error body's code).
    """

    code = "invalid_input"

    def __init__(self, input: str | None, message: str):
        super().__init__(message)
        self.input = input
        self.message = message


class WireError(InputError):
    """A value that does not fit its input's kind (SPEC H3, H4); ``.rule`` is the rule alone."""

    def __init__(self, name: str, rule: str):
        super().__init__(name, f"input '{name}': {rule}")
        self.rule = rule


class ShapeError(InputError):
    """An input whose shape (or head count) breaks an op's documented contract.

    ``input`` is the argument to fix, e.g. ``"ffn_norm"`` or ``"n_heads"`` (a
    comma-separated list when several clash).
    """

    code = "shape_error"


class LimitError(InputError):
    """A request that would exceed a size limit (SPEC H5); names the input."""

    code = "too_large"

    def __init__(self, name: str, rule: str):
        super().__init__(name, f"input '{name}': {rule}")
        self.rule = rule


class ComputeError(InputError):
    """NumPy refused the computation of an op (a broadcast, axis or index error, L0.4)."""

    code = "numpy_error"


def op_message(op: str, message: str) -> str:
    """``"{op}: {message}"``, without repeating the op when the message already names it
    (``cross_entropy: targets must …``, never ``cross_entropy: cross_entropy: …``): a
    shape rule names its op itself, and both the op route and the expression prefix it."""
    return message if message.startswith((f"{op}:", f"{op}(")) else f"{op}: {message}"


# --------------------------------------------------------------------------------------
# The library's doors: integers that must be integers, ids that must be ids
# --------------------------------------------------------------------------------------

_INTEGER = (int, np.integer)


def _is_int(value: Any) -> bool:
    return isinstance(value, _INTEGER) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as a Python int if it is an integer (not a bool, not a float such as
    2.0) in [minimum, maximum]; else TypeError/ValueError naming ``name`` and the rule.

    Example:
        >>> check_int("steps", 3, minimum=1)
        3
        >>> check_int("steps", 2.0, minimum=1)
        Traceback (most recent call last):
        TypeError: steps must be an integer, got float 2.0
    """
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        low = "" if minimum is None else f">= {minimum}"
        high = "" if maximum is None else f"<= {maximum}"
        raise ValueError(
            f"{name} must be an integer {' and '.join(filter(None, [low, high]))}, got {value}"
        )
    return value


def check_real(
    name: str, value: Any, minimum: float | None = None, *, strict: bool = False
) -> float:
    """``value`` as a float if it is a finite real number (bools refused) ≥ minimum
    (> minimum when ``strict``); else TypeError/ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (*_INTEGER, float, np.floating)
    ):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    below = minimum is not None and (value <= minimum if strict else value < minimum)
    if not math.isfinite(value) or below:
        rule = "" if minimum is None else f" {'>' if strict else '>='} {minimum}"
        raise ValueError(f"{name} must be a finite number{rule}, got {value}")
    return value


def _position(name: str, flat_index: int, shape: tuple[int, ...]) -> str:
    if len(shape) <= 1:
        return f"{name}[{flat_index}]"
    return f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(flat_index, shape))}]"


def id_array(ids: Any, name: str = "ids", high: int | None = None) -> np.ndarray:
    """Integer ids as an ``np.intp`` array of the same shape, each in [0, high).

    Any integer dtype is accepted (uint8 ids of a 256-row table included). Floats
    (even 104.0), bools, strings and None are a TypeError naming the first bad id, its
    position and value; an id outside [0, high) (or past the index type) is a
    ValueError naming the first such id.

    Example:
        >>> id_array([104, 105]).dtype == np.intp
        True
        >>> id_array([104, 105.5])
        Traceback (most recent call last):
        TypeError: ids[1] = 105.5 is not an integer id (got float)
    """
    arr = np.asarray(ids)
    mixed = not isinstance(ids, np.ndarray) and arr.dtype.kind in "iu" and arr.size
    if mixed and any(
        isinstance(v, (bool, np.bool_)) for v in np.ravel(np.array(ids, dtype=object))
    ):
        arr = np.asarray(ids, dtype=object)  # [104, True] is int64 to NumPy: find the bool
    if arr.dtype.kind not in "iu":  # floats, bools, objects: find the first non-integer
        for i, value in enumerate(np.asarray(ids, dtype=object).reshape(-1)):
            if not _is_int(value):
                shown = value.item() if isinstance(value, np.generic) else value
                raise TypeError(
                    f"{_position(name, i, arr.shape)} = {shown!r} is not an "
                    f"integer id (got {type(shown).__name__})"
                )
        try:  # all Python ints (or an empty list)
            arr = np.asarray(ids, dtype=np.int64)
        except OverflowError:
            raise ValueError(f"{name} holds an id outside the 64-bit range") from None
    limit = np.iinfo(np.intp).max if high is None else high
    bad = np.flatnonzero((arr < 0) | (arr >= limit)) if arr.size else []
    if len(bad):
        i = int(bad[0])
        raise ValueError(
            f"{_position(name, i, arr.shape)} = {arr.reshape(-1)[i]} is out of range [0, {limit})"
        )
    return arr.astype(np.intp)
