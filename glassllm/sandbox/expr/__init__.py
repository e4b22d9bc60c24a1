"""Composable expressions: every intermediate value and gradient of a small formula.

``evaluate("softmax(masked_fill(scores, mask, -inf))", {"scores": ..., "mask": ...})``
parses the formula with a restricted parser, builds a graph whose nodes are ops of the
registry (`glassllm.sandbox.registry`, H1), plans every node's shape before any compute (H5), runs
forward and backward once, and returns a plain JSON-ready dict — the body of
``POST /api/v1/eval``, so a notebook gets the same answer as the service. ``evaluate`` is
``run(prepare(...))``: `prepare` does every check and plan, and its result's ``cost``
(elements, multiply-adds) is known before any compute, as the registry's `Prepared.cost`:

- ``value``, ``shape``, ``grads`` (one per variable that requires grad), ``warnings``;
- ``nodes`` in evaluation order: ``id``, ``op``, ``span`` [start, end) and ``text`` of the
  source, ``inputs`` (node ids), ``shape``, ``value``, ``grad`` (the adjoint ∂out/∂node,
  shaped like the node; null where no gradient flows) and ``ledger``: per backward edge,
  the axes summed to undo broadcasting (L0.5);
- ``first_nonfinite``: the first node whose value (forward) or adjoint (backward) holds
  NaN / ±inf, with the count — NaN provenance as data; ``check``: gradcheck per variable.

The language: variable names, numbers, ``inf`` / ``nan``, calls of registry ops (positional
and keyword arguments, read by each input's kind), ``+ - * / ** @``, unary ``-``,
parentheses, indexing (``x[0]``, ``x[:, 1:]``, ``x[None]``, ``x[..., 0]``, ``x[ids]``) and
the methods ``.sum() .mean() .max() .reshape() .transpose() .T``. Anything else is an
`ExprError` with the position of the offending token.

Why Python's ``ast.parse(mode="eval")`` and not a hand-written parser: it gives exact
positions and Python's precedence (``-x ** 2``, right-associative ``**``) for free, and it
only *parses* — nothing is compiled or run. Safety comes from what happens after: the
source is checked for length, characters and bracket depth *before* parsing, every node
type is checked against a short whitelist, names are only looked up in the variables and
in the registry's dict (never ``getattr`` on user text), and ``eval`` / ``exec`` /
``compile`` are never called.
"""

from glassllm.sandbox.expr.evaluation import PreparedExpression, evaluate, prepare, run
from glassllm.sandbox.expr.evaluation import _forward as _forward  # the graph's forward, for tests
from glassllm.sandbox.expr.expr_errors import (
           ExprComputeError,
           ExprError,
           ExprLimitError,
           ExprShapeError,
)
from glassllm.sandbox.expr.graph import NODE_COST, Builder, Node
from glassllm.sandbox.expr.parser import parse
from glassllm.sandbox.limits import Limits

__all__ = ["NODE_COST", "Builder", "ExprComputeError", "ExprError", "ExprLimitError",
           "ExprShapeError", "Limits", "Node", "PreparedExpression", "evaluate", "parse",
           "prepare", "run"]
