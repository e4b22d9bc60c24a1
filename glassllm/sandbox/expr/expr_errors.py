"""The expression's refusals: `ExprError` and its kinds, each an `InputError`."""

from __future__ import annotations

import traceback
from pathlib import Path

from glassllm.errors import ComputeError, InputError, LimitError, ShapeError
from glassllm.errors import op_message as op_message  # used by graph.py

_GLASSLLM = str(Path(__file__).resolve().parents[2])  # the glassllm package


class ExprError(InputError):
    """A refusal of the expression language or its kinds (an `InputError`).

    `position` is the offset of the offending token in the expression; `span` the
    [start, end) of the sub-expression; `input` names the request field (``expression``,
    ``variables.x``, ``grad_output``, ``check``); `code` the rule (``too_deep`` …).
    Its kinds `ExprLimitError`, `ExprShapeError` and `ExprComputeError` are also a
    `LimitError`, `ShapeError` and `ComputeError`: the same rule, the same status.
    """

    code = "invalid_expression"

    def __init__(self, message: str, *, code: str | None = None, position: int | None = None,
                 span: tuple[int, int] | None = None, input: str = "expression",
                 op: str | None = None):
        where = f" (at position {position})" if position is not None else ""
        InputError.__init__(self, input, message + where)
        self.code = code or type(self).code
        self.position, self.span, self.op = position, span, op

    def detail(self) -> dict:
        return {"position": self.position, "span": list(self.span) if self.span else None}


class ExprLimitError(ExprError, LimitError):
    """An expression over a size limit (H5)."""

    code = "too_large"


class ExprShapeError(ExprError, ShapeError):
    """An op of the expression whose shapes break its contract; points at the argument."""

    code = "shape_error"


class ExprComputeError(ExprError, ComputeError):
    """An op of the expression refused its values (a broadcast, axis or index error):
    NumPy's own error (code ``numpy_error``) or glassllm's check of the same rule made
    before NumPy runs (code ``invalid_value``); points at the argument when one is to
    blame."""

    code = "numpy_error"


def raised_by_glassllm(exc: BaseException) -> bool:
    """True when one of glassllm's own checks raised `exc` (a ``raise`` statement in the
    glassllm package: `glassllm.shapes.index_shape`'s bounds, an id check), False when
    NumPy did (its Python code, or a C function called from glassllm's code). Only
    NumPy's refusals are labelled as NumPy's (``numpy_error``)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return False
    last = frames[-1]
    return (str(Path(last.filename).resolve()).startswith(_GLASSLLM)
            and (last.line or "").lstrip().startswith("raise"))

