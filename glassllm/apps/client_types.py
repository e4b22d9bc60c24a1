"""What the client hands a notebook and what it refuses before any request.

- `Result`, `to_wire`, `from_wire`: an answer as NumPy, and arrays on the wire exactly
  (given by ``glassllm.apps.client``, their public home; kept here for its line budget,
  and so the exercise and mystery calls can build them without importing the client).
- `CheckReport`: ``Sandbox.check``'s answer, still the dict it always was, drawn in a
  notebook as the per-element verdict of the value and of each gradient (glassllm.display).
- `result_picture`, `client_repr`: a ``Result`` and a ``Sandbox`` as a notebook shows them.
- `require`: a wrong type of argument is the caller's mistake, found on this side: a
  ``TypeError`` naming the argument and what it takes, not a 422 after a round trip (or,
  worse, a string iterated as a list of names). `to_wire` names the value it cannot send
  the same way (``variables['x']``), `path_segment` and `student_query` the id or student
  that cannot be part of a URL, all before any request.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import numpy as np

from glassllm.apps.torch_export import TorchCalls  # noqa: F401  (the client's mixin, given here)
from glassllm.sandbox.wire import BASE64_DTYPES, coerce, encode_array, encode_base64, is_base64


class CheckReport(dict):
    """``{"passed", "value": report, "grads": {name: report}, "warnings"}`` (a dict), with
    a notebook picture: per element of each checked array, right or wrong, and the
    pattern of the mistake when the check was by digits."""

    @classmethod
    def from_answer(cls, answer: dict) -> CheckReport:
        """Masks as NumPy bool arrays; numbers stay as the server wrote them."""
        def fix(report: dict | None) -> dict | None:
            if report and report.get("mask") is not None:
                report["mask"] = np.array(report["mask"], dtype=bool)
            return report
        answer["value"] = fix(answer.get("value"))
        answer["grads"] = {k: fix(v) for k, v in (answer.get("grads") or {}).items()}
        return cls(answer)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        from glassllm.apps import display
        return display.check_bundle(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """IPython's text form: the verdicts in words (``repr()`` stays the dict's)."""
        from glassllm.apps import display
        p.text(display.check_bundle(self)["text/plain"])


def result_picture(result: Any, include: Any = None, exclude: Any = None) -> dict[str, str]:
    """A client ``Result`` in a notebook: value and gradient heatmaps, an expression's
    graph with every node's value and gradient (the ``_repr_mimebundle_`` of ``Result``)."""
    from glassllm.apps import display
    return display.result_bundle(result.value, result.grads, result.raw, result.warnings)


def client_repr(client: Any) -> str:
    """``Sandbox('http://127.0.0.1:8000', token=…, timeout=30)``: where it talks to, and
    whether it sends a token (never the token itself)."""
    auth = ", token=…" if "Authorization" in client.headers else ""
    return f"{type(client).__name__}({client.url!r}{auth}, timeout={client.timeout:g})"


BASE64_MIN_ELEMENTS = 64
"""Arrays with at least this many elements travel as base64: below it the JSON text is as
short and needs no decoding step on either side."""


# --------------------------------------------------------------------------------------
# arrays on the wire
# --------------------------------------------------------------------------------------

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""The integers a request may hold: the sandbox's integer arrays and node ids are int64
(and orjson, the client's encoder when present, writes nothing wider than 64 bits)."""


def to_wire(value: Any, base64_min: int = BASE64_MIN_ELEMENTS, name: str = "value") -> Any:
    """A Python / NumPy value as JSON-ready data, exactly (H3).

    NumPy arrays of at least `base64_min` elements (numbers or booleans) become binary
    arrays; other arrays and floats become JSON, non-finite floats the string tokens.
    Lists, tuples and dicts are converted item by item (index objects keep their form);
    anything with ``__array__`` (a torch tensor) as its NumPy array.

    Whatever JSON cannot carry is refused here, before any request, naming where it is
    (`name`, then ``name['x'][0]`` inside): a TypeError for an object that is no number,
    string, list or dict; a ValueError for an integer outside int64 or text that is not
    valid Unicode (a lone surrogate).
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fiub" and value.size >= base64_min:
            return encode_base64(value)
        if value.dtype.kind in "fiub":
            return encode_array(value)
        return to_wire(value.tolist(), base64_min, name)     # object / string arrays: each item
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise ValueError(f"{name} is {str(value)[:40]}, outside int64 (-2**63 .. 2**63-1):"
                             " the sandbox cannot take it")
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else encode_array(np.float64(value))
    if isinstance(value, str):
        return text(name, value)
    if isinstance(value, list | tuple):
        return [to_wire(v, base64_min, f"{name}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {text(f"{name} key", str(k)): to_wire(v, base64_min, f"{name}[{k!r}]")
                for k, v in value.items()}
    if hasattr(value, "__array__") and not isinstance(value, np.generic):
        return to_wire(np.asarray(value), base64_min, name)
    raise TypeError(f"{name} must be a number, a nested list, a NumPy array or an index"
                    f" object, got {type(value).__name__}: {str(value)[:80]!r}")


def text(name: str, value: str) -> str:
    """`value`, unless it cannot be written as UTF-8 (a lone surrogate): ValueError naming
    it, not the JSON encoder's or ``quote``'s error naming nothing."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not valid text: {exc.reason} at position {exc.start}"
                         f" of {value[:80]!r}") from None
    return value


def path_segment(name: str, value: Any) -> str:
    """`value` (an exercise or mystery id, an op name) as one quoted path segment: never
    another route (``"../eval"``), a query or a fragment; ``"."`` and ``".."``, which a URL
    resolver removes, with their dots percent-encoded. TypeError unless a string,
    ValueError when empty (``/api/v1/mysteries/`` is the list route, which would answer
    with a redirect), both naming `name`."""
    require((name, value, "str", False))
    if not value:
        raise ValueError(f"{name} must not be empty: an empty one would ask for the list"
                         " route instead")
    segment = quote(value, safe="")
    return segment.replace(".", "%2E") if segment in (".", "..") else segment


def student_query(student: str | None) -> str:
    """``?student=...`` for `student`, else ``$GLASSLLM_STUDENT``, else none (``""``);
    TypeError naming ``student`` unless a string or None."""
    require(("student", student, "str"))
    student = student or os.environ.get("GLASSLLM_STUDENT") or None
    return f"?{urlencode({'student': student})}" if student else ""


def from_wire(value: Any, name: str = "value") -> np.ndarray:
    """An array of an answer (a number, a token, nested lists or a binary array) as NumPy.

    Floats come back float64 (bit-exact); binary arrays keep their dtype (int64, bool).
    """
    if is_base64(value):
        kind = {"float": "tensor", "int": "int_array", "bool": "bool_mask"}[
            BASE64_DTYPES.get(value.get("dtype"), ("", "float"))[1]]
        return coerce(kind, name, value)
    # An answer's JSON arrays hold numbers and the non-finite tokens, never true / false
    # (the sandbox writes float64): NumPy's own conversion, with the exact path only for
    # the tokens.
    return coerce("tensor", name, value, maybe_bools=False)


def case_array(value: Any, name: str) -> np.ndarray:
    """A case's array (an exercise's or a mystery's variable) as its kind: ids and
    targets stay integers, a mask booleans, the rest float64 (exactly, non-finite tokens
    included); a binary array keeps its dtype."""
    leaf = value
    while isinstance(leaf, list) and leaf:
        leaf = leaf[0]
    if isinstance(leaf, bool | int):
        return np.asarray(value)
    return from_wire(value, name)


@dataclass
class Result:
    """One computed answer: ``value`` (float64 array; 0-d for a scalar), ``grads`` (input or
    variable name → float64 array shaped like it), ``warnings`` (NumPy's floating-point
    warnings, H4) and ``raw`` (the rest of the answer: ``op``, ``nodes``, ``check`` ...);
    ``paths`` and ``dead`` read what eval answers when asked for them."""

    value: np.ndarray
    grads: dict[str, np.ndarray]
    warnings: list[str]
    raw: dict = field(default_factory=dict, repr=False)
    _repr_mimebundle_ = result_picture     # a notebook's heatmaps (and an expression's graph)

    @classmethod
    def from_answer(cls, answer: dict) -> Result:
        rest = {k: v for k, v in answer.items() if k not in ("value", "grads", "warnings")}
        for edge in (e for entry in rest.get("paths") or () for e in entry["edges"]):
            edge["grad"] = from_wire(edge["grad"], "paths")      # eval's paths: float64 arrays
            for head in edge.get("heads") or ():
                head["grad"] = from_wire(head["grad"], "paths")
        return cls(from_wire(answer["value"]),
                   {k: from_wire(v, k) for k, v in (answer.get("grads") or {}).items()},
                   list(answer.get("warnings") or []), rest)

    @property
    def paths(self) -> list[dict] | None:
        """With ``eval(..., paths=True)``: each shared node's gradient split by the op
        inputs that read it, ``[{"node", "edges": [{"consumer", "input", "grad", ...}]}]``,
        every ``grad`` a float64 array."""
        return self.raw.get("paths")

    @property
    def dead(self) -> list[dict] | None:
        """With ``eval(..., dead=True)``: each variable whose gradient is missing or dead,
        ``[{"variable", "node", "shape", "dead", "size", "missing", "rows", "causes":
        [{"reason", "words", "op", "node", "elements", "units"}]}]`` as the sandbox answers
        it (counts, ids and words: no arrays); None when not asked (docs/dead-gradients.md)."""
        return self.raw.get("dead")


# the arguments of the client's request builders, by name: (what to call it, kind, optional)
ARGUMENTS = {
    "inputs": ("inputs", "mapping", False), "requires_grad": ("requires_grad", "names", True),
    "grad_output": ("grad_output", "array", True), "expression": ("expression", "str", True),
    "variables": ("variables", "mapping", True), "op": ("op", "str", True),
    "value": ("value", "array", True), "grads": ("grads", "mapping", True),
    "reveal": ("reveal", "bool", True), "digits": ("digits", "int", True),
    "rtol": ("rtol", "number", True), "atol": ("atol", "number", True),
    "case": ("a batch's case", "mapping", False), "name": ("name", "str", False),
    "check": ("check", "check", True), "paths": ("paths", "bool", True),
    "dead": ("dead", "bool", True),
}


def typed(builder: Callable[..., Any]) -> Callable[..., Any]:
    """`builder` with each argument `ARGUMENTS` names checked first (`require`)."""
    signature = inspect.signature(builder)

    @functools.wraps(builder)
    def checked(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs).arguments
        require(*((label, bound[n], kind, optional) for n, (label, kind, optional)
                  in ARGUMENTS.items() if n in bound))
        return builder(*args, **kwargs)
    return checked


def require(*checks: tuple) -> None:
    """TypeError unless each ``(name, value, kind[, optional])`` holds: `value` is of
    `kind`, or None when `optional` (the default).

    Kinds: ``"str"``; ``"mapping"`` (input or variable name → value); ``"names"`` (a list
    or tuple of strings, never a bare string); ``"array"`` (a number, a nested list, a
    NumPy array or anything with ``__array__``); ``"bool"``; ``"int"`` and ``"number"`` (not
    a bool). A ``"str"`` that is not valid Unicode (a lone surrogate) is a ValueError."""
    for name, value, kind, *rest in checks:
        if value is None and (rest[0] if rest else True):
            continue
        if not KINDS[kind][0](value):
            raise TypeError(f"{name} must be {KINDS[kind][1]}, got {type(value).__name__}: "
                            f"{str(value)[:80]!r}")
        if kind == "str":
            text(name, value)


KINDS: dict[str, tuple[Any, str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "mapping": (lambda v: isinstance(v, Mapping) and all(isinstance(k, str) for k in v),
                "a dict of name -> value with string names"),
    "names": (lambda v: (isinstance(v, Sequence) and not isinstance(v, str | bytes)
                         and all(isinstance(k, str) for k in v)),
              "a list of names (strings), not a single string"),
    "array": (lambda v: (isinstance(v, int | float | list | tuple | np.ndarray | np.generic)
                         and not isinstance(v, bool)) or hasattr(v, "__array__"),
              "a number, a nested list or a NumPy array"),
    "bool": (lambda v: isinstance(v, bool | np.bool_), "True or False"),
    "check": (lambda v: isinstance(v, bool | Mapping), "True, False or a dict of options"),
    "int": (lambda v: isinstance(v, int | np.integer) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: isinstance(v, int | float | np.number) and not isinstance(v, bool),
               "a number"),
    "function": (callable, "a function"),
}
