"""Composable expressions: every intermediate value and gradient of a small formula (issue 5).

``evaluate("softmax(masked_fill(scores, mask, -inf))", {"scores": ..., "mask": ...})``
parses the formula with a restricted parser, builds a graph whose nodes are ops of the
registry (`glassllm.registry`, H1), plans every node's shape before any compute (H5), runs
forward and backward once, and returns a plain JSON-ready dict — the body of
``POST /api/v1/eval``, so a notebook gets the same answer as the service:

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

from __future__ import annotations

import ast
import keyword
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from glassllm import autograd, registry
from glassllm.gradcheck import gradcheck
from glassllm.registry import L06, LimitError, Op
from glassllm.shapes import ShapeError
from glassllm.tensor import Tensor, summed_axes
from glassllm.wire import WireError, coerce, encode_array, is_base64

__all__ = ["ExprError", "Limits", "evaluate", "parse"]

NUMPY_ERRORS = (ValueError, IndexError, TypeError, ArithmeticError)
BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow",
          ast.MatMult: "matmul"}
METHODS = {"sum": "tsum", "mean": "mean", "max": "max", "reshape": "reshape",
           "transpose": "transpose"}
CONSTANT_NAMES = {"inf": math.inf, "nan": math.nan}
ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.Call, ast.Name, ast.Constant,
           ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.keyword, ast.Load,
           *BINOPS)
# Ops whose backward sums a gradient back over broadcast axes with `unbroadcast` (L0.5).
ELEMENTWISE = {"add", "sub", "mul", "div", "pow", "rpow", "where", "masked_fill", "rope",
               "rms_norm"}
PRINTABLE = frozenset(range(0x20, 0x7F)) | {0x09, 0x0A, 0x0D}
# What one node's Python call costs, in elements of NumPy work: ~2 µs per node against
# ~4 ns per element built (measured on a 2000-element check). Counted by `check`'s bound.
NODE_COST = 512


@dataclass(frozen=True)
class Limits:
    """Bounds of one evaluation; the service fills them from its settings (H5)."""

    max_length: int = 2000            # characters of the expression (422 above)
    max_depth: int = 64               # bracket depth and syntax-tree depth (422)
    max_nodes: int = 256              # nodes of the graph (422)
    max_array_elements: int = 1_000_000    # elements of one variable (413)
    max_result_elements: int = 4_000_000   # elements of any node or intermediate (413)
    max_graph_elements: int = 4_000_000    # elements of all nodes together (413): each is sent
    max_matmul_madds: int = 1_000_000_000  # multiply-adds of all matmuls, with backward (413)
    max_check_elements: int = 2_000        # elements finite-differenced by check (413);
    # check's total work (2 forward passes per checked element) is held to max_matmul_madds


class ExprError(ValueError):
    """A refusal: `status` 422 (language, kinds), 413 (limits) or 400 (NumPy's errors).

    `position` is the offset of the offending token in the expression; `span` the
    [start, end) of the sub-expression; `input` names the request field (``expression``,
    ``variables.x``, ``grad_output``, ``check``).
    """

    def __init__(self, message: str, *, status: int = 422, code: str = "invalid_expression",
                 position: int | None = None, span: tuple[int, int] | None = None,
                 input: str = "expression", op: str | None = None):
        where = f" (at position {position})" if position is not None else ""
        super().__init__(message + where)
        self.message, self.status, self.code = message + where, status, code
        self.position, self.span, self.input, self.op = position, span, input, op

    def detail(self) -> dict:
        return {"position": self.position, "span": list(self.span) if self.span else None}


# --------------------------------------------------------------------------------------
# parsing: source checks, then ast.parse, then a whitelist walk
# --------------------------------------------------------------------------------------

@dataclass
class Parsed:
    tree: ast.Expression
    source: str
    line_starts: list[int]

    def pos(self, node: ast.AST) -> int:
        return self.line_starts[node.lineno - 1] + node.col_offset

    def span(self, node: ast.AST) -> tuple[int, int]:
        return self.pos(node), self.line_starts[node.end_lineno - 1] + node.end_col_offset

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]


def _fail(message: str, position: int | None = None, **kw: Any) -> ExprError:
    return ExprError(message, position=position, **kw)


def parse(expression: Any, limits: Limits = Limits()) -> Parsed:
    """Check and parse; raises `ExprError` (422) with the offending position."""
    if not isinstance(expression, str):
        raise _fail("'expression' must be a string")
    if len(expression) > limits.max_length:
        raise _fail(f"the expression has {len(expression)} characters; the limit is"
                    f" {limits.max_length}", code="expression_too_long")
    if not expression.strip():
        raise _fail("the expression is empty")
    depth = 0
    for i, ch in enumerate(expression):
        if ord(ch) not in PRINTABLE:
            raise _fail(f"character {ch!r} is not part of the expression language", i)
        if ch in "([{":
            depth += 1
            if depth > limits.max_depth:
                raise _fail(f"brackets nest deeper than {limits.max_depth}", i,
                            code="too_deep")
        elif ch in ")]}":
            depth -= 1
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        ended = "; the expression ends too soon (a missing operand?)" if not exc.offset else ""
        raise _fail(f"syntax error: {exc.msg}{ended}",
                    _syntax_error_position(expression, exc)) from None
    except (RecursionError, MemoryError, ValueError):
        raise _fail("the expression is nested too deeply to parse", code="too_deep") from None
    parsed = Parsed(tree, expression, _line_starts(expression))
    _whitelist(parsed, limits)
    return parsed


def _syntax_error_position(source: str, exc: SyntaxError) -> int:
    """Where the parser stopped: the offending token (``*`` in ``x +* y``, ``2`` in ``1 2``,
    the unclosed ``(``), or — when the input ran out first (``x +``, ``x @``), which
    Python reports as offset 0 — the end of the expression, where the operand is missing.
    """
    if not exc.offset or not exc.lineno:
        return len(source.rstrip())
    starts = _line_starts(source)
    pos = starts[min(exc.lineno - 1, len(starts) - 1)] + exc.offset - 1
    return min(max(pos, 0), len(source))


def _line_starts(source: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(source):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def _whitelist(p: Parsed, limits: Limits) -> None:
    """Every node type, attribute and constant is checked; the earliest offence is reported."""
    offences: list[tuple[int, str]] = []
    methods: set[int] = set()          # ids of Attribute nodes that are the callee of a Call
    count = 0
    stack: list[tuple[ast.AST, int]] = [(p.tree, 0)]
    while stack:                        # iterative: a deep tree cannot overflow the stack
        node, depth = stack.pop()
        if isinstance(node, ast.expr):
            count += 1
            if depth > limits.max_depth:
                raise _fail(f"the expression nests deeper than {limits.max_depth}", p.pos(node),
                            code="too_deep")
        if count > 4 * limits.max_nodes:
            raise _fail(f"the expression has more than {4 * limits.max_nodes} parts",
                        code="too_many_nodes")
        if not isinstance(node, ALLOWED):
            offences.append((_offence_pos(p, node), _describe(node)))
            continue
        if isinstance(node, ast.Constant) and not (
                node.value is None or node.value is Ellipsis
                or isinstance(node.value, bool | int | float)):
            kind = "string" if isinstance(node.value, str | bytes) else type(node.value).__name__
            offences.append((p.pos(node), f"not part of the expression language: {kind}"
                                          " literals"))
        elif isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                methods.add(id(node.func))
            elif isinstance(node.func, ast.Name) and registry.get(node.func.id) is None:
                offences.append((p.pos(node.func), f"'{node.func.id[:40]}' is not an op of the"
                                                   " registry (GET /api/v1/ops lists them)"))
            elif not isinstance(node.func, ast.Name):
                offences.append((p.pos(node.func), "only registry ops and the methods .sum()"
                                 " .mean() .max() .reshape() .transpose() can be called"))
            for kw in node.keywords:
                if kw.arg is None:
                    offences.append((p.pos(kw), "**keyword unpacking is not part of the"
                                                " expression language"))
        elif isinstance(node, ast.Attribute):
            called = id(node) in methods
            ok = (node.attr == "T" and not called) or (node.attr in METHODS and called)
            where = p.span(node)[1] - len(node.attr)
            if node.attr == "T" and called:
                offences.append((where, "`.T` is a property, not a method; write x.T or"
                                        " x.transpose()"))
            elif not ok:
                offences.append((where, f"attribute '.{node.attr[:40]}' is not allowed; only"
                                        " .T and the methods .sum() .mean() .max() .reshape()"
                                        " .transpose()"))
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            offences.append((p.pos(node), f"the name '{node.id[:40]}' is not allowed"))
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    if offences:
        pos, message = min(offences)
        raise _fail(message, pos)


def _offence_pos(p: Parsed, node: ast.AST) -> int:
    if hasattr(node, "lineno"):
        return p.pos(node)
    return 0


def _describe(node: ast.AST) -> str:
    names = {ast.Lambda: "lambda", ast.ListComp: "comprehensions", ast.GeneratorExp:
             "generator expressions", ast.Compare: "comparisons", ast.BoolOp: "and / or",
             ast.IfExp: "conditional expressions", ast.Starred: "* unpacking", ast.Dict:
             "dict literals", ast.Set: "set literals", ast.JoinedStr: "f-strings",
             ast.NamedExpr: ":=", ast.Await: "await"}
    what = names.get(type(node), type(node).__name__)
    return f"not part of the expression language: {what}"


# --------------------------------------------------------------------------------------
# the graph: one node per variable (and kind), constant or op application
# --------------------------------------------------------------------------------------

@dataclass
class Node:
    id: int
    op: str                                   # "variable", "constant" or a registry op
    span: tuple[int, int]
    text: str
    shape: tuple[int, ...]
    requires_grad: bool = False
    kind: str = "tensor"                      # how a variable was read (wire kind)
    name: str | None = None                   # a variable's name
    value: Any = None                         # variables and constants: the data
    args: list = field(default_factory=list)  # op nodes, per input: ("node", id) | ("value", v)

    @property
    def inputs(self) -> list[int]:
        """Input node ids, in the op's input order (index arrays after the indexed tensor)."""
        out: list[int] = []
        for how, v in self.args:
            if how == "node":
                out.append(v)
            elif how == "index":
                out.extend(v[1])
        return out


class Builder:
    """AST → list of `Node`s in evaluation order; every shape planned and bounded (H5)."""

    def __init__(self, p: Parsed, variables: dict[str, tuple[Any, bool | None]], limits: Limits,
                 maybe_bools: bool = True):
        self.p, self.variables, self.limits = p, variables, limits
        self.maybe_bools = maybe_bools          # the speed hint of `evaluate`, for coerce
        self.nodes: list[Node] = []
        self.by_var: dict[tuple[str, str], int] = {}
        self.elements = 0
        self.madds = 0
        self.forward_work = 0      # ≈ one forward pass: multiply-adds + elements + NODE_COST

    def error(self, message: str, node: ast.AST, **kw: Any) -> ExprError:
        return ExprError(message, position=self.p.pos(node), span=self.p.span(node), **kw)

    def add(self, node: Node) -> int:
        if len(self.nodes) >= self.limits.max_nodes:
            raise ExprError(f"the expression makes more than {self.limits.max_nodes} nodes",
                            position=node.span[0], code="too_many_nodes")
        size = math.prod(node.shape)
        self.elements += size
        self.forward_work += size + NODE_COST
        if size > self.limits.max_result_elements or self.elements > self.limits.max_graph_elements:
            raise ExprError(f"`{node.text[:60]}` would bring the graph to {self.elements}"
                            f" elements; the limits are {self.limits.max_result_elements} per"
                            f" node and {self.limits.max_graph_elements} in all (SPEC H5)",
                            status=413, code="too_large", span=node.span,
                            position=node.span[0], op=node.op)
        node.id = len(self.nodes)
        self.nodes.append(node)
        return node.id

    # -- leaves ---------------------------------------------------------------------
    def variable(self, name: str, kind: str, where: ast.AST, why: str) -> int:
        key = (name, kind)
        if key in self.by_var:
            return self.by_var[key]
        raw, rg = self.variables[name]
        try:
            value = coerce(kind, name, raw, maybe_bools=self.maybe_bools,
                           max_elements=self.limits.max_array_elements)
        except LimitError as exc:
            raise ExprError(f"variable '{name}': {exc.rule}", status=413, code="too_large",
                            input=f"variables.{name}") from None
        except WireError as exc:
            raise ExprError(f"variable '{name}', read as {kind} ({why}): {exc.rule}",
                            input=f"variables.{name}", span=self.p.span(where)) from None
        if kind in ("tensor", "array", "table", "int_array", "bool_mask") and \
                np.size(value) > self.limits.max_array_elements:
            raise ExprError(f"variable '{name}' has {np.size(value)} elements; the limit is"
                            f" {self.limits.max_array_elements}", status=413, code="too_large",
                            input=f"variables.{name}")
        if kind == "tensor":
            rg = True if rg is None else rg
        elif rg:
            raise ExprError(f"variable '{name}' has requires_grad true but is used as {why},"
                            f" which is not differentiable: {L06}", input=f"variables.{name}",
                            span=self.p.span(where))
        node = Node(0, "variable", self.p.span(where), name, np.shape(value), bool(rg), kind,
                    name, value)
        self.by_var[key] = self.add(node)
        return self.by_var[key]

    def constant(self, value: float, where: ast.AST) -> int:
        return self.add(Node(0, "constant", self.p.span(where), self.p.text(where), (),
                             value=np.float64(value)))

    # -- tensor-valued expressions ------------------------------------------------------
    def expr(self, node: ast.AST) -> int:
        if isinstance(node, ast.Name):
            if node.id in self.variables:
                return self.variable(node.id, "tensor", node, "a tensor")
            if node.id in CONSTANT_NAMES:
                return self.constant(CONSTANT_NAMES[node.id], node)
            if registry.get(node.id) is not None:
                raise self.error(f"'{node.id}' is an op; call it: {node.id}(...)", node)
            raise self.error(f"undefined name '{node.id[:40]}'; the variables are: "
                             + (", ".join(sorted(self.variables)) or "none"), node)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            return self.constant(self._float(node.value, node), node)
        if isinstance(node, ast.UnaryOp):
            literal = self._number(node)
            if literal is not None:
                return self.constant(literal, node)
            return self.apply(registry.OPS["neg"], node, [node.operand], [])
        if isinstance(node, ast.BinOp):
            name = BINOPS[type(node.op)]
            if name == "pow" and self._number(node.left) is not None \
                    and self._number(node.right) is None:
                name = "rpow"  # 2 ** t: a constant base, a differentiable exponent
            op = registry.OPS[name]
            return self.apply(op, node, [node.left, node.right], [])
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                op = registry.get(node.func.id)
                if op is None:
                    raise self.error(f"'{node.func.id[:40]}' is not an op of the registry"
                                     " (GET /api/v1/ops lists them)", node.func)
                return self.apply(op, node, node.args, node.keywords)
            op = registry.OPS[METHODS[node.func.attr]]
            args: list[ast.AST] = list(node.args)
            if op.name in ("reshape", "transpose") and (
                    len(args) > 1 or (len(args) == 1 and self._number(args[0]) is not None)):
                args = [ast.Tuple(elts=args, ctx=ast.Load(), **_pos_of(args))]   # t.reshape(2, 3)
            return self.apply(op, node, [node.func.value, *args], node.keywords)
        if isinstance(node, ast.Attribute):                                     # .T
            return self.apply(registry.OPS["transpose"], node, [node.value], [])
        if isinstance(node, ast.Subscript):
            return self.apply(registry.OPS["getitem"], node, [node.value, node.slice], [])
        raise self.error(f"{_what(node)} cannot stand for a tensor here; pass arrays as"
                         " variables", node)

    def _float(self, v: int | float, node: ast.AST) -> float:
        try:
            return float(v)
        except OverflowError:
            raise self.error("the number is too large for float64", node) from None

    def _number(self, node: ast.AST) -> float | None:
        """A numeric literal, maybe negated: 2, -1.5, inf, -inf, nan; else None."""
        if isinstance(node, ast.UnaryOp):
            inner = self._number(node.operand)
            return None if inner is None else -inner
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            return self._float(node.value, node)
        if isinstance(node, ast.Name) and node.id in CONSTANT_NAMES \
                and node.id not in self.variables:
            return CONSTANT_NAMES[node.id]
        return None

    # -- literals for constant inputs (axis, shape, keepdims, value, index) ------------
    def literal(self, node: ast.AST, what: str) -> Any:
        number = self._number(node)
        if number is not None:
            if isinstance(node, ast.Constant) and isinstance(node.value, int):
                return node.value
            if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant) \
                    and isinstance(node.operand.value, int):
                return -node.operand.value
            return number
        if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, bool)):
            return node.value
        if isinstance(node, ast.Tuple | ast.List):
            return [self.literal(e, what) for e in node.elts]
        raise self.error(f"{what} must be a literal (a number, True / False / None, or a tuple"
                         f" of integers); got {_what(node)}", node)

    def index(self, node: ast.AST) -> tuple[Any, list[int]]:
        """A subscript as a NumPy index, plus the variable nodes used as index arrays."""
        refs: list[int] = []
        items = node.elts if isinstance(node, ast.Tuple) else [node]
        out = []
        for item in items:
            if isinstance(item, ast.Slice):
                parts = []
                for part in (item.lower, item.upper, item.step):
                    value = None if part is None else self.literal(part, "a slice bound")
                    if value is not None and type(value) is not int:
                        raise self.error("slice bounds must be integers", part)
                    if value is not None:
                        self._coerce("int", "index", value, part)          # int64 (H3)
                    parts.append(value)
                if parts[2] == 0:
                    raise self.error("slice step cannot be zero", item)
                out.append(slice(*parts))
            elif isinstance(item, ast.Constant) and item.value is Ellipsis:
                out.append(Ellipsis)
            elif isinstance(item, ast.Name) and item.id in self.variables:
                raw = self.variables[item.id][0]
                kind = "bool_mask" if isinstance(_first_leaf(raw), bool) else "int_array"
                ref = self.variable(item.id, kind, item, "an index")
                refs.append(ref)
                out.append(self.nodes[ref].value)
            else:
                value = self.literal(item, "an index")
                if isinstance(value, list):
                    value = self._coerce("int_array", "index", value, item)
                elif isinstance(value, bool) or (value is not None and not isinstance(value, int)):
                    raise self.error("an index is an integer, a slice, None, ..., a list of"
                                     " integers or an integer-array variable", item)
                elif value is not None:
                    self._coerce("int", "index", value, item)              # int64 (H3)
                out.append(value)
        return (tuple(out) if isinstance(node, ast.Tuple) else out[0]), refs

    def _coerce(self, kind: str, name: str, value: Any, node: ast.AST) -> Any:
        try:
            return coerce(kind, name, value)
        except WireError as exc:
            raise self.error(str(exc), node) from None

    # -- op applications ------------------------------------------------------------------
    def bind(self, op: Op, node: ast.AST, args: list, keywords: list) -> dict[str, ast.AST]:
        names = [i.name for i in op.inputs]
        if len(args) > len(names):
            raise self.error(f"{op.name} takes at most {len(names)} arguments"
                             f" ({', '.join(names)}); got {len(args)}", args[len(names)])
        bound = dict(zip(names, args, strict=False))
        for kw in keywords:
            if kw.arg not in names:
                raise self.error(f"{op.name} has no input '{kw.arg}'; its inputs are"
                                 f" {', '.join(names)}", kw)
            if kw.arg in bound:
                raise self.error(f"{op.name} got input '{kw.arg}' twice", kw)
            bound[kw.arg] = kw.value
        for spec in op.inputs:
            if spec.name not in bound and spec.required:
                raise self.error(f"{op.name} needs input '{spec.name}' ({spec.kind})", node)
        return bound

    def apply(self, op: Op, node: ast.AST, args: list, keywords: list) -> int:
        bound = self.bind(op, node, args, keywords)
        values: list[tuple[str, Any]] = []
        for spec in op.inputs:
            if spec.name not in bound:
                values.append(("value", spec.default))
                continue
            arg, why = bound[spec.name], f"input '{spec.name}' of {op.name}"
            if spec.kind == "tensor":
                values.append(("node", self.expr(arg)))
            elif spec.kind in ("array", "table"):
                if isinstance(arg, ast.Name) and arg.id in self.variables:
                    ref = self.variable(arg.id, spec.kind, arg, why)
                else:
                    ref = self.expr(arg)
                if self.nodes[ref].requires_grad:
                    hint = "; for a differentiable exponent write exp(b * log(a))" \
                        if op.name == "pow" else ""
                    raise self.error(f"{why} is a constant and gets no gradient, but this"
                                     f" expression requires grad: {L06}{hint}", arg)
                values.append(("node", ref))
            elif spec.kind == "index":
                index, refs = self.index(arg)
                values.append(("index", (index, refs)))
            elif isinstance(arg, ast.Name) and arg.id in self.variables and \
                    spec.kind in ("int_array", "bool_mask", "number", "int"):
                values.append(("node", self.variable(arg.id, spec.kind, arg, why)))
            else:
                values.append(("value", self._coerce(spec.kind, spec.name,
                                                      self.literal(arg, why), arg)))
        return self.add_op(op, node, values, bound)

    def add_op(self, op: Op, node: ast.AST, values: list[tuple[str, Any]],
               bound: dict[str, ast.AST]) -> int:
        plan_args = {}
        for spec, (how, v) in zip(op.inputs, values, strict=True):
            if how == "index":
                plan_args[spec.name] = v[0]
            elif how == "value":
                plan_args[spec.name] = v
            elif spec.kind in ("tensor", "array", "table"):
                plan_args[spec.name] = registry.probe(self.nodes[v].shape)
            else:
                plan_args[spec.name] = self.nodes[v].value
        span, text = self.p.span(node), self.p.text(node)
        try:
            plan = registry.plan(op, plan_args)
            registry.check_limits(plan, max_result_elements=self.limits.max_result_elements,
                                  max_matmul_madds=self.limits.max_matmul_madds)
        except WireError as exc:
            raise ExprError(f"{op.name}: {exc}", span=span, position=span[0], op=op.name) from None
        except LimitError as exc:
            raise ExprError(f"`{text[:60]}`: {exc}", status=413, code="too_large", span=span,
                            position=span[0],
                            op=op.name) from None
        except ShapeError as exc:                  # points at the argument that breaks it
            arg = bound.get(exc.input.split(",")[0])
            where = self.p.span(arg) if arg is not None else span
            name = arg.id if isinstance(arg, ast.Name) and arg.id in self.variables else None
            raise ExprError(f"`{text[:60]}`: {op.name}: {exc}", status=400, code="shape_error",
                            span=where, position=where[0], op=op.name,
                            input=f"variables.{name}" if name else "expression") from None
        except (*NUMPY_ERRORS, MemoryError) as exc:
            raise ExprError(f"`{text[:60]}`: {op.name}: {type(exc).__name__}: {exc}",
                            status=400, code="numpy_error", span=span, position=span[0],
                            op=op.name) from None
        self.madds += plan.madds
        # the forward's share: a plan counts each product 3× (forward + the backward's two,
        # glassllm.shapes.matmul_cost) and lists the arrays built inside (erring high)
        self.forward_work += plan.madds // 3 + sum(n for _, n in plan.sizes)
        if self.madds > self.limits.max_matmul_madds:
            raise ExprError(f"the matmuls would take {self.madds} multiply-adds; the limit is"
                            f" {self.limits.max_matmul_madds} (SPEC H5)", status=413,
                            code="too_large", span=span, op=op.name)
        rg = op.output == "tensor" and any(
            self.nodes[v].requires_grad for (how, v), spec in zip(values, op.inputs, strict=True)
            if how == "node" and spec.kind == "tensor")
        return self.add(Node(0, op.name, span, text, tuple(plan.shape), rg, args=values))


def _first_leaf(raw: Any) -> Any:
    """The first element of a nested list (or `raw` itself): its type tells a boolean mask
    index from an integer one in O(depth), without walking the array."""
    while isinstance(raw, list) and raw:
        raw = raw[0]
    return raw


def _pos_of(nodes: list[ast.AST]) -> dict:
    return {"lineno": nodes[0].lineno, "col_offset": nodes[0].col_offset,
            "end_lineno": nodes[-1].end_lineno, "end_col_offset": nodes[-1].end_col_offset}


def _what(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"the literal {node.value!r}"[:60]
    return {ast.Tuple: "a tuple", ast.List: "a list", ast.Slice: "a slice"}.get(
        type(node), type(node).__name__)


# --------------------------------------------------------------------------------------
# evaluation: forward keeping every adjoint (retain_grad), one backward, then the report
# --------------------------------------------------------------------------------------

class FloatWarnings:
    """NumPy's floating-point warnings of one evaluation, naming the node that raised them.

    NumPy 2 keeps the error state in a context variable, so this is per thread and per
    request (H6), unlike the `warnings` module's catch. The wording is the ops route's.
    """

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.where = ""

    def __call__(self, kind: str, flag: int) -> None:
        message = f"{kind} encountered (NumPy floating-point warning){self.where}"
        if message not in self.messages:
            self.messages.append(message)

    def __enter__(self) -> FloatWarnings:
        # Underflow to 0 is the exact, expected result of e.g. softmax over large logits:
        # not worth a warning. H4 names the other three.
        self._state = np.errstate(divide="call", over="call", invalid="call", under="ignore",
                                  call=self)
        self._state.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._state.__exit__(*exc)


def _forward(nodes: list[Node], leaves: dict[int, Tensor], fw: FloatWarnings | None = None,
             retain: bool = False) -> list[Any]:
    """Run the graph; tensor variables come from `leaves` (constants when absent)."""
    vals: list[Any] = []
    for n in nodes:
        if n.op == "variable":
            if n.kind in ("tensor", "array", "table"):
                v = leaves[n.id] if n.id in leaves else Tensor(n.value)
            else:
                v = n.value
        elif n.op == "constant":
            v = Tensor(n.value)
        else:
            op = registry.OPS[n.op]
            call = []
            for spec, (how, a) in zip(op.inputs, n.args, strict=True):
                if how == "value":
                    call.append(a)
                elif how == "index":
                    call.append(a[0])
                elif spec.kind in ("array", "table"):
                    call.append(vals[a].data)                 # a constant (L0.6)
                else:
                    call.append(vals[a])
            if fw is not None:
                fw.where = f" in node {n.id} `{n.text[:40]}`"
            try:
                out = op.fn(*call)
            except NUMPY_ERRORS as exc:
                raise ExprError(f"`{n.text[:60]}`: {n.op}: {type(exc).__name__}: {exc}",
                                status=400, code="numpy_error", span=n.span,
                                position=n.span[0], op=n.op) from None
            v = out if isinstance(out, Tensor) else Tensor(out)   # ndarray ops: constants (L0.2)
            if retain and v.requires_grad:
                v.retain_grad()
        vals.append(v)
    return vals


def _variables(variables: Any) -> dict[str, tuple[Any, bool | None]]:
    """{name: {"value": ..., "requires_grad": ...}} or {name: value} → {name: (value, rg)}."""
    if variables is None:
        return {}
    if not isinstance(variables, dict):
        raise ExprError("'variables' must be an object: name → {\"value\": ...,"
                        " \"requires_grad\": ...}", input="variables")
    out: dict[str, tuple[Any, bool | None]] = {}
    for name, spec in variables.items():
        if not (isinstance(name, str) and name.isascii() and name.isidentifier()
                and not keyword.iskeyword(name) and not name.startswith("__")
                and name not in CONSTANT_NAMES and len(name) <= 64):
            raise ExprError(f"variable name {str(name)[:40]!r} must be a Python identifier of"
                            " at most 64 characters, not a keyword, inf, nan or a __dunder__",
                            input="variables")
        rg = None
        if isinstance(spec, Tensor):
            value, rg = spec.data, spec.requires_grad
        elif isinstance(spec, dict) and not is_base64(spec):
            extra = sorted(set(spec) - {"value", "requires_grad"})
            if extra or "value" not in spec:
                raise ExprError(f"variable '{name}' must be {{\"value\": ..., \"requires_grad\":"
                                " true | false}} (or the bare value)", input=f"variables.{name}")
            value, rg = spec["value"], spec.get("requires_grad")
            if rg is not None and not isinstance(rg, bool):
                raise ExprError(f"variable '{name}': requires_grad must be true or false",
                                input=f"variables.{name}")
        else:
            value = spec
        if isinstance(value, Tensor):
            value = value.data
        if isinstance(value, np.ndarray | np.generic):
            value = value.tolist()
        out[name] = (value, rg)
    return out


def _ledger(n: Node, nodes: list[Node]) -> list[dict]:
    """Per tensor input: the axes of the incoming gradient summed to undo broadcasting (L0.5)."""
    if n.op in ("variable", "constant"):
        return []
    op = registry.OPS[n.op]
    entries = []
    tensor_refs = [(i, a) for i, (spec, (how, a)) in enumerate(zip(op.inputs, n.args, strict=True))
                   if how == "node" and spec.kind == "tensor"]
    for i, ref in tensor_refs:
        shape = nodes[ref].shape
        if n.op in ELEMENTWISE:
            axes = summed_axes(n.shape, shape)
        elif n.op in ("matmul", "linear") and len(tensor_refs) == 2:
            sa, sb = nodes[tensor_refs[0][1]].shape, nodes[tensor_refs[1][1]].shape
            a2 = sa if len(sa) > 1 else (1, *sa)                        # (…, n, k)
            b2 = sb if len(sb) > 1 else (*sb, 1)                        # (…, k, m)
            batch = np.broadcast_shapes(a2[:-2], b2[:-2])
            own = a2 if i == 0 else b2
            axes = summed_axes((*batch, *own[-2:]), own)
        else:
            axes = ()
        entries.append({"input": ref, "summed_axes": list(axes)})
    return entries


def _nonfinite(a: Any) -> int:
    a = np.asarray(a)
    return int(a.size - np.count_nonzero(np.isfinite(a))) if a.dtype.kind == "f" else 0


def _number(x: float) -> Any:
    return encode_array(np.float64(x))


def evaluate(expression: str, variables: Any = None, grad_output: Any = None,
             check: bool = False, limits: Limits = Limits(), *,
             maybe_bools: bool = True) -> dict:
    """Evaluate `expression` forward and backward; the result is the ``/api/v1/eval`` body.

    Args:
        expression: e.g. ``"embedding(weight, ids).sum()"``.
        variables: name → ``{"value": array, "requires_grad": bool}`` or the bare value
            (nested lists in the wire format, NumPy arrays, Tensors). ``requires_grad``
            defaults to true for a variable used as a differentiable tensor (as H2).
        grad_output: the seed of the backward pass, shaped like the output; default ones
            (the gradient of the output's sum, H2).
        check: also compare every gradient with central differences (`gradcheck`).
        limits: the bounds (H5); refusals are `ExprError` with `status` 413.
        maybe_bools: a speed hint for large arrays (see `glassllm.wire`); keep True unless
            you know the JSON holds no ``true`` / ``false``.

    Raises: `ExprError` (status 422 / 413 / 400) naming the position or input.

    Example:
        >>> r = evaluate("embedding(weight, ids).sum()",
        ...              {"weight": [[0.0, 0.0]] * 4, "ids": [1, 2, 1]})
        >>> r["grads"]["weight"]
        [[0.0, 0.0], [2.0, 2.0], [1.0, 1.0], [0.0, 0.0]]

    Clauses: H2, H3, H5, L0.5, L0.6.
    """
    if not isinstance(check, bool):
        raise ExprError("'check' must be true or false", input="check")
    vars_ = _variables(variables)
    parsed = parse(expression, limits)
    builder = Builder(parsed, vars_, limits, maybe_bools=maybe_bools)
    out_id = builder.expr(parsed.tree.body)
    nodes = builder.nodes
    _check_constant_reuse(nodes)
    out_node = nodes[out_id]

    seed = None
    if grad_output is not None:
        if not out_node.requires_grad:
            raise ExprError("grad_output was given but the output does not require grad (no"
                            " variable it depends on requires grad, or it is an ndarray, L0.2)",
                            input="grad_output")
        if isinstance(grad_output, Tensor):
            grad_output = grad_output.data
        if isinstance(grad_output, np.ndarray | np.generic):
            grad_output = grad_output.tolist()
        try:
            seed = coerce("tensor", "grad_output", grad_output, maybe_bools=maybe_bools)
        except WireError as exc:
            raise ExprError(str(exc), input="grad_output") from None
        if seed.shape != out_node.shape:
            raise ExprError(f"grad_output has shape {list(seed.shape)} but the output has shape"
                            f" {list(out_node.shape)}", input="grad_output")
    checked = [n for n in nodes if n.op == "variable" and n.kind == "tensor" and n.requires_grad]
    if check:
        _check_cost(sum(math.prod(n.shape) for n in checked), builder, limits)

    fw = FloatWarnings()
    with fw:
        leaves = {n.id: Tensor(n.value, requires_grad=True) for n in checked}
        vals = _forward(nodes, leaves, fw, retain=True)
        out = vals[out_id]
        if out.requires_grad:
            fw.where = " during backward"
            seed = np.ones_like(out.data) if seed is None else seed
            try:
                out.backward(seed)
            except NUMPY_ERRORS as exc:
                raise ExprError(f"backward: {type(exc).__name__}: {exc}", status=400,
                                code="numpy_error") from None
        report = None
        if check and out.requires_grad:
            fw.where = " during check"
            report = _gradcheck(nodes, out_id, checked, seed)
        elif check:
            report = {}

    grads_of = [None] * len(nodes)
    for n in nodes:
        if n.requires_grad and out.requires_grad:
            g = vals[n.id].grad
            grads_of[n.id] = np.zeros(n.shape) if g is None else g
    first = None
    for n in nodes:
        count = _nonfinite(vals[n.id].data if isinstance(vals[n.id], Tensor) else vals[n.id])
        if count:
            first = {"node": n.id, "pass": "forward", "count": count}
            break
    if first is None:
        for n in reversed(nodes):
            count = 0 if grads_of[n.id] is None else _nonfinite(grads_of[n.id])
            if count:
                first = {"node": n.id, "pass": "backward", "count": count}
                break

    value = vals[out_id].data
    return {
        "value": encode_array(value),
        "shape": list(value.shape),
        "grads": {n.name: encode_array(grads_of[n.id]) for n in checked
                  if grads_of[n.id] is not None},
        "warnings": fw.messages,
        "output": out_id,
        "nodes": [_describe_node(n, vals[n.id], grads_of[n.id], nodes) for n in nodes],
        "first_nonfinite": first,
        "check": report,
    }


def _check_cost(count: int, builder: Builder, limits: Limits) -> None:
    """Refuse `check` (413) before computing when it would be too long (H5).

    Central differences run the whole forward pass twice per checked element, so the
    work is ≈ 2 · count · (the forward's multiply-adds + the elements it builds + a
    per-node cost): held to the same multiply-add limit as the rest of the request.
    """
    if count > limits.max_check_elements:
        raise ExprError(f"check would finite-difference {count} elements; the limit is"
                        f" {limits.max_check_elements}", status=413, code="too_large",
                        input="check")
    total = 2 * count * builder.forward_work
    if total > limits.max_matmul_madds:
        raise ExprError(f"check would finite-difference {count} elements with 2 forward passes"
                        f" each, {builder.forward_work} operations per pass (multiply-adds,"
                        f" elements built, {NODE_COST} per node): {total} in all; the limit is"
                        f" {limits.max_matmul_madds} (SPEC H5)", status=413, code="too_large",
                        input="check")


def _describe_node(n: Node, v: Any, grad: Any, nodes: list[Node]) -> dict:
    data = v.data if isinstance(v, Tensor) else v
    out = {"id": n.id, "op": n.op, "span": list(n.span), "text": n.text,
           "inputs": n.inputs, "shape": list(np.shape(data)), "requires_grad": n.requires_grad,
           "value": encode_array(data), "grad": None if grad is None else encode_array(grad),
           "ledger": _ledger(n, nodes)}
    if n.op == "variable":
        out["name"], out["kind"] = n.name, n.kind
    return out


def _check_constant_reuse(nodes: list[Node]) -> None:
    """`x ** x` with x requiring grad would silently treat the exponent as a constant: refuse."""
    differentiable = {n.name for n in nodes if n.op == "variable" and n.kind == "tensor"
                      and n.requires_grad}
    for n in nodes:
        if n.op == "variable" and n.kind != "tensor" and n.name in differentiable:
            raise ExprError(f"variable '{n.name}' requires grad, but here it is read as a"
                            f" constant ({n.kind}): {L06}; write exp(b * log(a)) for a"
                            " differentiable exponent, or set requires_grad false",
                            span=n.span, position=n.span[0], input=f"variables.{n.name}")


def _gradcheck(nodes: list[Node], out_id: int, checked: list[Node], seed: np.ndarray) -> dict:
    """Central differences in float64 for every variable that requires grad (STYLE 7)."""
    ids = [n.id for n in checked]

    def fn(*tensors: Tensor) -> Tensor:
        return _forward(nodes, dict(zip(ids, tensors, strict=True)))[out_id]

    inputs = [Tensor(n.value, requires_grad=True) for n in checked]
    # A non-finite output (a masked -inf) makes sum(out * seed) non-finite, and its finite
    # differences NaN: those positions are left out of the checked objective, and said so.
    out = fn(*[Tensor(n.value) for n in checked]).data
    finite = np.isfinite(out)
    note = None
    check_fn = fn
    if not finite.all():
        def check_fn(*tensors: Tensor) -> Tensor:
            return autograd.where(finite, fn(*tensors), 0.0)
        note = (f"{int(finite.size - finite.sum())} non-finite output positions are left out"
                " of the checked objective sum(out * grad_output)")
    result = gradcheck(check_fn, *inputs, grad_output=seed)
    return {n.name: {"analytic": encode_array(c.analytic), "numeric": encode_array(c.numeric),
                     "max_abs_err": _number(c.max_abs_err), "max_rel_err": _number(c.max_rel_err),
                     "passed": c.passed, "note": note}
            for n, c in zip(checked, result.inputs, strict=True)}
