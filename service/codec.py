"""JSON in and out with orjson and NumPy (SPEC H3): large arrays never go element by element
through pydantic. Parsing and array building happen in C; the non-finite tokens and the
strict int / bool kinds take the exact path of `glassllm.wire` only when needed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from glassllm.wire import encode_array

_OPEN = np.zeros(256, dtype=np.int8)
_OPEN[[ord("["), ord("{")]] = 1
_OPEN[[ord("]"), ord("}")]] = -1


def json_depth(body: bytes) -> int:
    """The deepest nesting of [ and { in `body`, without parsing it (vectorised).

    Brackets inside strings are skipped by quote parity; an escaped quote (\\") is
    recognised, an escaped backslash before a closing quote is not — at worst that makes
    the count approximate for such strings, and orjson still refuses past depth 1024.
    """
    b = np.frombuffer(body, dtype=np.uint8)
    quote = b == ord('"')
    quote[1:] &= b[:-1] != ord("\\")
    outside = (np.cumsum(quote, dtype=np.int64) & 1) == 0
    steps = np.where(outside, _OPEN[b], 0)
    return int(np.cumsum(steps, dtype=np.int64).max(initial=0))


def loads(body: bytes) -> Any:
    return orjson.loads(body)


def encode_value(arr: np.ndarray) -> Any:
    """One result array for orjson: a 0-d result is a JSON number (H2), a finite array goes
    to orjson's native NumPy writer, a non-finite one through the string tokens (H3)."""
    arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim == 0 or not np.isfinite(arr).all():
        return encode_array(arr)
    return np.ascontiguousarray(arr)


def dumps(obj: Any) -> bytes:
    """Strict JSON: orjson writes float64 with the shortest repr that round-trips exactly."""
    return orjson.dumps(obj, option=orjson.OPT_SERIALIZE_NUMPY)
