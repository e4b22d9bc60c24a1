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
"""

from __future__ import annotations

__all__ = ["ComputeError", "InputError", "LimitError", "ShapeError", "WireError",
           "echo_name", "op_message"]

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
