"""The wire format of the gradient sandbox (SPEC H3): JSON values <-> NumPy, one kind at a time.

Pure Python + NumPy, no web framework: the service (`glassllm_service`) and the expression
evaluator (`glassllm.sandbox.expr`) share it, so a notebook and the HTTP API read inputs the
same way.

Arrays travel as JSON numbers and nested lists of float64. Non-finite floats travel as the
strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (``"nan"``, ``"inf"``, ``"-inf"`` are also
accepted on input). Every refusal is a `WireError` that names the input and the rule broken.

Exact binary arrays: anywhere an array is accepted it may also travel as
``{"dtype": "float64", "shape": [2, 3], "base64": "..."}``, the little-endian bytes of the
array in C order, base64-encoded (RFC 4648, with padding). Float inputs take ``float64``
(or ``float32``, ``int64``, ``int32``, widened as JSON numbers are); integer inputs
``int64`` or ``int32``; masks ``bool`` (one byte per element, 0 or 1). The element count
comes from ``shape`` and is held to the limit *before* anything is decoded; a base64 text
whose length does not hold exactly ``prod(shape) * itemsize`` bytes, or that is not
base64, is a `WireError` naming the input.
`encode_base64` writes the same form (a response asked for with ``"encoding": "base64"``).

Every integer on the wire is an int64 (ids, targets, index arrays and items, slice bounds,
axes, shapes, repeats): JSON has no integer bound, so one outside [-2**63, 2**63 - 1] is
refused by name (422), never wrapped through uint64 nor left to overflow later (a 500).

Speed: a large finite array never goes element by element through Python. `np.array` builds
it in C; only arrays that hold strings (non-finite tokens) or booleans among numbers take
the slow, exact path. The caller says whether booleans can be present at all
(``maybe_bools``): the service passes ``b"true" in body or b"false" in body``, which is
False for nearly every numeric request, so the check costs one byte search.

Kinds (the ``kind`` of a registry input, see `glassllm.sandbox.registry`):

=========  ===========================================================================
tensor     float64 array or number (L0.3); may be differentiable
array      float64 array or number, a constant (pow's exponent, softmax_np's input)
table      float64 array, a constant trig table (rope's cos / sin, L0.6)
int_array  integer array or integer (ids, targets): ``1.5``, ``true``, ``"3"`` refused
bool_mask  boolean array (``0`` / ``1`` integers accepted); strings refused
number     one float, non-finite tokens accepted (masked_fill's value)
int        one integer (repeat_kv's repeats)
bool       ``true`` / ``false`` (keepdims)
axis       null, an integer, or a list of integers
axes       null or a list of integers (transpose)
shape      an integer or a list of integers, ``-1`` allowed once (reshape)
index      a NumPy index as JSON, see `decode_index`
=========  ===========================================================================
"""

from __future__ import annotations

import binascii
import math
import re
from typing import Any

import numpy as np

from glassllm.errors import LimitError, WireError, echo_name

try:    # SIMD base64, ~100x the standard library's speed; the service extra installs it
    from pybase64 import b64decode
    from pybase64 import b64encode_as_string as _b64_text  # from the array's buffer: no copies
except ImportError:                                    # the core library needs NumPy alone
    from base64 import b64decode, b64encode

    def _b64_text(data: Any) -> str:
        return b64encode(data).decode("ascii")

__all__ = [
    "ARRAY_KINDS",
    "BASE64_DTYPES",
    "NONFINITE_IN",
    "WireError",
    "coerce",
    "decode_index",
    "encode_array",
    "encode_base64",
    "encode_index",
    "is_base64",
]

NONFINITE_IN = {
    "NaN": math.nan, "nan": math.nan,
    "Infinity": math.inf, "inf": math.inf,
    "-Infinity": -math.inf, "-inf": -math.inf,
}
ARRAY_KINDS = frozenset({"tensor", "array", "table", "int_array", "bool_mask"})


# --------------------------------------------------------------------------------------
# scalars
# --------------------------------------------------------------------------------------

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _float(name: str, v: Any) -> float:
    """One JSON number (or non-finite token) as a Python float."""
    if isinstance(v, float) or _is_int(v):
        try:
            return float(v)
        except OverflowError:
            raise WireError(name, f"{_describe(v)} is too large for float64") from None
    if isinstance(v, str) and v in NONFINITE_IN:
        return NONFINITE_IN[v]
    raise WireError(name, f"must be a number or one of \"NaN\", \"Infinity\", \"-Infinity\";"
                          f" got {_describe(v)}")


INT64_MIN, INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def _past_int64(v: Any) -> bool:
    """An integral float beyond int64: how orjson hands over an integer literal >= 2**64."""
    return isinstance(v, float) and v.is_integer() and abs(v) >= 2.0 ** 63


def _int(name: str, v: Any, what: str = "must be an integer") -> int:
    """One JSON integer that fits int64, the dtype every integer input has (H3).

    orjson reads an integer literal outside [-2**63, 2**64) as a float64 (2**64 arrives as
    1.8446744073709552e+19): an integral float that large was an integer too big for int64
    — or written as one, 1e30 — so it is told so, not that it is no integer. A float
    below 2**63 (3.0) is still refused as not an integer: JSON said what it meant.
    """
    if _past_int64(v):
        raise WireError(name, f"the integer {v!r} is outside int64 (-2**63 to 2**63 - 1)")
    if not _is_int(v):
        raise WireError(name, f"{what}; got {_describe(v)}")
    if not INT64_MIN <= v <= INT64_MAX:
        text = _describe(v)
        text = text if text.startswith("an integer") else f"the integer {text}"
        raise WireError(name, f"{text} is outside int64 (-2**63 to 2**63 - 1)")
    return v


def _int_list(name: str, v: Any) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise WireError(name, f"must be a list of integers; got {_describe(v)}")
    return tuple(_int(name, item) for item in v)


def _describe(v: Any) -> str:
    """A short, safe description of a JSON value for error messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f"the string {v[:20]!r}" + ("…" if len(v) > 20 else "")
    if isinstance(v, list):
        return "a list"
    if isinstance(v, dict):
        return "an object"
    text = repr(v)
    if _is_int(v) and len(text) > 30:
        return f"an integer of {len(text.lstrip('-'))} digits"
    return text[:30]


# --------------------------------------------------------------------------------------
# arrays
# --------------------------------------------------------------------------------------

def _nested(name: str, value: Any) -> np.ndarray:
    """Build an array with NumPy's own inference; ragged lists are refused (422)."""
    try:
        return np.array(value)
    except (ValueError, TypeError, OverflowError) as exc:
        raise WireError(name, f"must be a rectangular nested list (ragged lists are refused):"
                              f" {exc}") from None


def _exact_elements(name: str, value: list) -> np.ndarray:
    """The slow, exact path: a rectangular object array of the JSON leaves."""
    try:
        arr = np.array(value, dtype=object)
    except (ValueError, TypeError) as exc:
        raise WireError(name, f"must be a rectangular nested list: {exc}") from None
    for leaf in arr.flat:
        if isinstance(leaf, list | dict):
            raise WireError(name, "must be a rectangular nested list (ragged lists are refused)")
    return arr


def _float_array(name: str, value: Any, maybe_bools: bool) -> np.ndarray:
    if isinstance(value, dict):
        return _from_base64(name, value, "float").astype(np.float64, copy=False)
    if not isinstance(value, list):
        return np.array(_float(name, value))
    arr = _nested(name, value)
    if arr.dtype.kind in "iuf" and not maybe_bools:        # the fast path: all numbers
        return arr.astype(np.float64, copy=False)
    if arr.dtype.kind == "b":
        raise WireError(name, "must hold numbers, not booleans")
    leaves = _exact_elements(name, value)
    out = np.empty(leaves.shape, dtype=np.float64)
    flat = out.reshape(-1)
    for i, leaf in enumerate(leaves.flat):
        flat[i] = _float(name, leaf)
    return out


def _held_to(name: str, arr: np.ndarray, limit: int | None) -> np.ndarray:
    """`LimitError` (413) when a JSON array built by `_nested` has more than `limit` elements:
    checked before the exact, element-by-element path would walk it."""
    if limit is not None and arr.size > limit:
        raise LimitError(name, f"has {arr.size} elements; the limit is {limit}")
    return arr


def _int_array(name: str, value: Any, maybe_bools: bool, limit: int | None = None) -> np.ndarray:
    if isinstance(value, dict):
        return _from_base64(name, value, "int", limit).astype(np.int64, copy=False)
    if not isinstance(value, list):
        return np.array(_int(name, value), dtype=np.int64)
    arr = _held_to(name, _nested(name, value), limit)
    # The fast path takes int64 only: NumPy infers uint64 (or float64, or object) as soon as
    # one integer is >= 2**63, and casting that to int64 would wrap it silently (2**64 - 1
    # would become -1, a valid id). Those go through the exact path, which names it.
    if arr.dtype == np.int64 and not maybe_bools:
        return arr
    if arr.size == 0 and arr.dtype.kind == "f":             # [] has no element to refuse
        return arr.astype(np.int64)
    leaves = _exact_elements(name, value)
    for leaf in leaves.flat:
        _int(name, leaf, "must hold integers (indices)")
    return leaves.astype(np.int64)


def _bool_mask(name: str, value: Any, maybe_bools: bool, limit: int | None = None) -> np.ndarray:
    del maybe_bools
    if isinstance(value, dict):
        return _from_base64(name, value, "bool", limit)
    if isinstance(value, bool):
        return np.array(value)
    if _is_int(value) and value in (0, 1):
        return np.array(bool(value))
    if not isinstance(value, list):
        raise WireError(name, f"must be booleans (true = masked); got {_describe(value)}")
    arr = _held_to(name, _nested(name, value), limit)
    if arr.dtype.kind == "b":
        return arr
    if arr.size == 0 and arr.dtype.kind == "f":
        return arr.astype(bool)
    if arr.dtype.kind in "iu" and np.isin(arr, (0, 1)).all():
        return arr.astype(bool)
    for leaf in _exact_elements(name, value).flat:          # name the first offender
        if not (isinstance(leaf, bool) or (_is_int(leaf) and leaf in (0, 1))):
            raise WireError(name, "must hold booleans (true / false, or 0 / 1); got"
                                  f" {_describe(leaf)}")
    raise WireError(name, "must hold booleans (true / false, or 0 / 1)")  # not reached


# --------------------------------------------------------------------------------------
# exact binary arrays: {"dtype", "shape", "base64"}
# --------------------------------------------------------------------------------------

# dtype name -> (little-endian NumPy dtype, the family of input kinds that takes it)
BASE64_DTYPES: dict[str, tuple[str, str]] = {
    "float64": ("<f8", "float"), "float32": ("<f4", "float"),
    "int64": ("<i8", "int"), "int32": ("<i4", "int"),
    "bool": ("|b1", "bool"),
}
# float inputs also take integer bytes, widened as JSON integers are (ids sent as floats
# are not: an integer input refuses float bytes as it refuses 1.5)
_FAMILY_DTYPES = {"float": ["float64", "float32", "int64", "int32"],
                  "int": ["int64", "int32"], "bool": ["bool"]}
MAX_NDIM = 32                     # NumPy's own limit is 64; no registry op needs more than 4
MAX_DIM = 2 ** 31 - 1             # per axis; the element limit bounds the product
_FAMILY = {"tensor": "float", "array": "float", "table": "float", "int_array": "int",
           "bool_mask": "bool"}


_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def is_base64(value: Any) -> bool:
    """True for a value in the binary form ``{"dtype", "shape", "base64"}``."""
    return isinstance(value, dict) and "base64" in value


def _from_base64(name: str, value: dict, family: str, limit: int | None = None) -> np.ndarray:
    """Decode one binary array; every check that can fail runs before the bytes are decoded.

    Raises `WireError` (422) for unknown keys, a dtype the input does not take, a bad shape,
    a base64 text of the wrong length for ``prod(shape) * itemsize`` bytes, or one that is not
    base64; `LimitError` (413) when ``prod(shape)`` passes the element limit.
    """
    keys = set(value)
    if keys != {"dtype", "shape", "base64"}:
        extra = sorted(keys - {"dtype", "shape", "base64"})
        what = (f"has the unknown key {echo_name(extra[0], 20)!r}" if extra
                else "lacks " + ", ".join(sorted({"dtype", "shape", "base64"} - keys)))
        raise WireError(name, f"a binary array is {{\"dtype\", \"shape\", \"base64\"}}; this one"
                              f" {what}")
    dtype, shape, text = value["dtype"], value["shape"], value["base64"]
    allowed = _FAMILY_DTYPES[family]
    if dtype not in allowed:
        raise WireError(name, f"dtype must be {' or '.join(repr(d) for d in allowed)} for this"
                              f" input; got {_describe(dtype)}")
    if not isinstance(shape, list) or len(shape) > MAX_NDIM or not all(
            _is_int(d) and 0 <= d <= MAX_DIM for d in shape):
        got = str(shape[:MAX_NDIM + 1])[:80] if isinstance(shape, list) else _describe(shape)
        raise WireError(name, f"shape must be a list of at most {MAX_NDIM} integers from 0 to"
                              f" {MAX_DIM}; got {got}")
    if not isinstance(text, str):
        raise WireError(name, f"base64 must be a string; got {_describe(text)}")
    count = math.prod(shape)
    if limit is not None and count > limit:
        raise LimitError(name, f"has {count} elements (shape {shape}); the limit is {limit}")
    le = np.dtype(BASE64_DTYPES[dtype][0])
    need = count * le.itemsize
    if len(text) != 4 * -(-need // 3):
        if not _BASE64_TEXT.fullmatch(text):       # not base64 at all: say that, not a size
            raise WireError(name, "base64 is malformed: it may hold only A-Z, a-z, 0-9, + and"
                                  " /, with at most two = at the end (RFC 4648)")
        pad = len(text) - len(text.rstrip("="))
        got = max(len(text) // 4 * 3 - pad, 0) if len(text) % 4 == 0 else None
        said = (f"{got} byte{'' if got == 1 else 's'}" if got is not None
                else f"a length of {len(text)} (not a multiple of 4)")
        raise WireError(name, f"shape {shape} of {dtype} needs {need} bytes; the base64 text holds"
                              f" {said}")
    try:
        raw = b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError(name, f"base64 is malformed: {exc}") from None
    if len(raw) != need:
        raise WireError(name, f"shape {shape} of {dtype} needs {need} bytes; the base64 text holds"
                              f" {len(raw)} byte{'' if len(raw) == 1 else 's'}")
    try:
        arr = np.frombuffer(raw, dtype=le).reshape(shape)
    except ValueError as exc:          # an empty array whose other axes NumPy cannot hold
        raise WireError(name, f"shape {shape[:MAX_NDIM]} is refused by NumPy: {exc}") from None
    if family == "bool":
        as_bytes = np.frombuffer(raw, dtype=np.uint8)
        if as_bytes.size and as_bytes.max() > 1:
            raise WireError(name, "a bool array holds one byte per element, 0 or 1")
    return arr.astype(le.newbyteorder("="), copy=True)     # native order, writeable


def encode_base64(arr: Any) -> dict:
    """A NumPy array as ``{"dtype", "shape", "base64"}``: exact for every float64 bit pattern
    (NaN, ±Infinity, -0.0, subnormals). Floats travel as float64, integers as int64."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "b":
        dtype = "bool"
    elif arr.dtype.kind in "iu":
        # every integer on the wire is an int64 (H3): a uint64 above 2**63 - 1 would wrap to a
        # negative number (2**64 - 1 → -1, a valid id from the end), so it is refused here, as
        # the sandbox refuses the same value sent as a JSON number
        if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 and arr.size and arr.max() > INT64_MAX:
            raise ValueError(f"cannot encode {arr.dtype.name} value {int(arr.max())} as int64:"
                             " unsigned values above 2**63-1 do not fit int64, the wire's"
                             " integer type (H3)")
        dtype = "int64"
    else:
        dtype = "float64"
    data = np.ascontiguousarray(arr, dtype=BASE64_DTYPES[dtype][0])
    return {"dtype": dtype, "shape": list(arr.shape),
            "base64": _b64_text(data)}


def encode_array(arr: Any) -> Any:
    """A NumPy result as a JSON-ready value: a float for 0-d, else nested lists.

    Non-finite floats become "NaN" / "Infinity" / "-Infinity" so the JSON stays strict (H3).
    """
    arr = np.asarray(arr)
    if arr.dtype.kind == "b":
        return arr.tolist()
    if arr.dtype.kind in "iu":
        return arr.tolist()
    arr = arr.astype(np.float64, copy=False)
    if np.isfinite(arr).all():
        return arr.tolist()
    tokens = np.where(np.isnan(arr), "NaN", np.where(arr > 0, "Infinity", "-Infinity"))
    obj = arr.astype(object)
    bad = ~np.isfinite(arr)
    obj[bad] = tokens[bad]
    return obj.tolist()


# --------------------------------------------------------------------------------------
# indices (getitem)
# --------------------------------------------------------------------------------------

def decode_index(name: str, value: Any, *, maybe_bools: bool = True,
                 max_elements: int | None = None) -> Any:
    """A NumPy index from JSON. One item, or a list of items meaning a tuple:

    ``3`` → ``3``; ``null`` → ``np.newaxis``; ``"..."`` → ``Ellipsis``;
    ``{"start": 1, "stop": null, "step": 2}`` → ``slice(1, None, 2)`` (keys optional);
    ``{"array": [[0, 1], [1, 0]]}`` → an integer index array (advanced indexing);
    ``{"mask": [true, false]}`` → a boolean index array.
    Example: ``x[:, 1:, None, [0, 2]]`` is ``[{}, {"start": 1}, null, {"array": [0, 2]}]``.
    A bare list is always a tuple of items, never an index array (NumPy's old ambiguity).

    `max_elements` holds every index array (``array`` or ``mask``) to the element limit of
    array inputs (H5): a binary one by its declared shape before its bytes are decoded, a
    JSON one before it is checked element by element (`LimitError`, 413, naming `name`).
    """
    if isinstance(value, list):
        return tuple(_index_item(name, item, maybe_bools, max_elements) for item in value)
    return _index_item(name, value, maybe_bools, max_elements)


def _index_item(name: str, item: Any, maybe_bools: bool = True,
                max_elements: int | None = None) -> Any:
    if item is None:
        return None
    if item == "...":
        return Ellipsis
    if _is_int(item) or _past_int64(item):
        return _int(name, item)
    if isinstance(item, dict):
        keys = set(item)
        if keys <= {"start", "stop", "step"}:
            parts = [item.get(k) for k in ("start", "stop", "step")]
            for part in parts:
                if part is not None:
                    _int(name, part, "slice start / stop / step must be integers or null")
            if parts[2] == 0:
                raise WireError(name, "slice step cannot be zero")
            return slice(*parts)
        if keys == {"array"}:
            return _int_array(name, item["array"], maybe_bools, max_elements)
        if keys == {"mask"}:
            return _bool_mask(name, item["mask"], maybe_bools, max_elements)
    raise WireError(name, 'index items are integers, null (new axis), "...", '
                          '{"start","stop","step"} slices, {"array": ints} or {"mask": bools};'
                          f" got {_describe(item)}")


def encode_index(index: Any) -> Any:
    """The inverse of `decode_index` (for examples and the page's "copy as curl")."""
    if isinstance(index, tuple):
        return [encode_index(i) for i in index]
    if index is None or _is_int(index):
        return index
    if index is Ellipsis:
        return "..."
    if isinstance(index, slice):
        return {"start": index.start, "stop": index.stop, "step": index.step}
    arr = np.asarray(index)
    return {"mask": arr.tolist()} if arr.dtype.kind == "b" else {"array": arr.tolist()}


# --------------------------------------------------------------------------------------
# the dispatcher
# --------------------------------------------------------------------------------------

def coerce(kind: str, name: str, value: Any, *, maybe_bools: bool = True,
           max_elements: int | None = None) -> Any:
    """One JSON value as the Python / NumPy value an op of `glassllm.autograd` takes.

    `max_elements` bounds a binary array (``{"dtype", "shape", "base64"}``) by its declared
    shape, before its bytes are decoded (`LimitError`, 413); an index's arrays, binary or
    JSON, too (`decode_index`).

    Raises `WireError` (named input, rule broken) when the value does not fit the kind.
    """
    if kind in _FAMILY and is_base64(value):
        arr = _from_base64(name, value, _FAMILY[kind], max_elements)
        return arr.astype(np.int64 if kind == "int_array" else
                          bool if kind == "bool_mask" else np.float64, copy=False)
    if kind in ("tensor", "array", "table"):
        return _float_array(name, value, maybe_bools)
    if kind == "int_array":
        return _int_array(name, value, maybe_bools)
    if kind == "bool_mask":
        return _bool_mask(name, value, maybe_bools)
    if kind == "number":
        return _float(name, value)
    if kind == "int":
        return _int(name, value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise WireError(name, f"must be true or false; got {_describe(value)}")
        return value
    if kind == "axis":
        if value is None:
            return value
        if _is_int(value) or _past_int64(value):
            return _int(name, value)
        if isinstance(value, list):
            return _int_list(name, value)
        raise WireError(name, "must be null, an integer or a list of integers;"
                              f" got {_describe(value)}")
    if kind == "axes":
        return None if value is None else _int_list(name, value)
    if kind == "shape":
        return (_int(name, value),) if not isinstance(value, list) else _int_list(name, value)
    if kind == "index":
        return decode_index(name, value, maybe_bools=maybe_bools, max_elements=max_elements)
    raise ValueError(f"unknown input kind {kind!r}")   # a registry bug, not user input
