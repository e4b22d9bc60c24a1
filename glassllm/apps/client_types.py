"""What the client hands a notebook and what it refuses before any request.

- `CheckReport`: ``Sandbox.check``'s answer, still the dict it always was, drawn in a
  notebook as the per-element verdict of the value and of each gradient (glassllm.display).
- `result_picture`, `client_repr`: a ``Result`` and a ``Sandbox`` as a notebook shows them.
- `require`: a wrong type of argument is the caller's mistake, found on this side: a
  ``TypeError`` naming the argument and what it takes, not a 422 after a round trip (or,
  worse, a string iterated as a list of names).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class CheckReport(dict):
    """``{"passed", "value": report, "grads": {name: report}, "warnings"}`` (a dict), with
    a notebook picture: per element of each checked array, right or wrong, and the
    pattern of the mistake when the check was by digits."""

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


def require(*checks: tuple) -> None:
    """TypeError unless each ``(name, value, kind[, optional])`` holds: `value` is of
    `kind`, or None when `optional` (the default).

    Kinds: ``"str"``; ``"mapping"`` (input or variable name → value); ``"names"`` (a list
    or tuple of strings, never a bare string); ``"array"`` (a number, a nested list, a
    NumPy array or anything with ``__array__``); ``"bool"``; ``"int"`` and ``"number"`` (not
    a bool)."""
    for name, value, kind, *rest in checks:
        if value is None and (rest[0] if rest else True):
            continue
        if not KINDS[kind][0](value):
            raise TypeError(f"{name} must be {KINDS[kind][1]}, got {type(value).__name__}: "
                            f"{str(value)[:80]!r}")


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
    "int": (lambda v: isinstance(v, int | np.integer) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: isinstance(v, int | float | np.number) and not isinstance(v, bool),
               "a number"),
}
