"""The expression's refusals: `ExprError` and its kinds, each an `InputError`."""

from __future__ import annotations

from glassllm.errors import ComputeError, InputError, LimitError, ShapeError


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
    """NumPy refused an op of the expression (a broadcast, axis or index error)."""

    code = "numpy_error"
