"""The graph of an expression: one `Node` per variable (and kind), constant or op
application, built from the parsed tree by `Builder`, every shape planned and bounded
before any compute (H5)."""

from __future__ import annotations

import ast
import difflib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from glassllm.errors import InputError, LimitError, ShapeError, WireError, echo_name
from glassllm.sandbox import registry
from glassllm.sandbox.expr.expr_errors import (
    ExprComputeError,
    ExprError,
    ExprLimitError,
    ExprShapeError,
    op_message,
    raised_by_glassllm,
)
from glassllm.sandbox.expr.parser import (
    BINOPS,
    CONSTANT_NAMES,
    CUTS,
    METHODS,
    Parsed,
    not_an_op,
)
from glassllm.sandbox.limits import Limits
from glassllm.sandbox.registry import NO_GRADIENT_RULE, NUMPY_ERRORS, Op
from glassllm.sandbox.wire import coerce, is_base64

# What one node's Python call costs, in elements of NumPy work: ~2 µs per node against
# ~4 ns per element built (measured on a 2000-element check). Counted by `check`'s bound.
NODE_COST = 512


# --------------------------------------------------------------------------------------
# the graph: one node per variable (and kind), constant or op application
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeArg:
    """An op's input that is another node of the graph (its id)."""

    id: int

    def node_ids(self) -> tuple[int, ...]:
        return (self.id,)


@dataclass(frozen=True)
class LiteralArg:
    """An op's input given as a literal (axis, shape, keepdims, a fill value) or default."""

    value: Any

    def node_ids(self) -> tuple[int, ...]:
        return ()


@dataclass(frozen=True)
class IndexArg:
    """getitem's index: the NumPy index, and the variable nodes used as index arrays."""

    index: Any
    refs: tuple[int, ...]

    def node_ids(self) -> tuple[int, ...]:
        return self.refs


Arg = NodeArg | LiteralArg | IndexArg


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
    args: list[Arg] = field(default_factory=list)   # op nodes: one per input of the op
    summed: dict = field(default_factory=dict)  # op nodes: per input, axes its gradient sums
    built: int = 0                            # op nodes: elements its plan builds inside

    @property
    def inputs(self) -> list[int]:
        """Input node ids, in the op's input order (index arrays after the indexed tensor)."""
        return [i for arg in self.args for i in arg.node_ids()]


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
        self.intermediates = 0     # elements of the arrays the ops build inside (their plans)
        self.forward_work = 0      # ≈ one forward pass: multiply-adds + elements + NODE_COST

    def error(self, message: str, node: ast.AST, **kw: Any) -> ExprError:
        return ExprError(message, position=self.p.pos(node), span=self.p.span(node), **kw)

    def unknown_name(self, node: ast.Name) -> ExprError:
        """A name that is neither a variable, ``inf`` / ``nan``, nor (uncalled) an op: the
        same message in every slot (tensor, literal, index), with the close matches."""
        if registry.get(node.id) is not None:
            return self.error(f"'{node.id}' is an op; call it: {node.id}(...)", node)
        close = difflib.get_close_matches(node.id, list(self.variables), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return self.error(f"undefined name '{echo_name(node.id)}'; the variables are: "
                          + (", ".join(sorted(self.variables)) or "none") + hint, node)

    def add(self, node: Node) -> int:
        if len(self.nodes) >= self.limits.max_nodes:
            raise ExprError(f"the expression makes more than {self.limits.max_nodes} nodes",
                            position=node.span[0], code="too_many_nodes")
        size = math.prod(node.shape)
        self.elements += size
        self.forward_work += size + NODE_COST
        if size > self.limits.max_result_elements or self.elements > self.limits.max_graph_elements:
            raise ExprLimitError(f"`{node.text[:60]}` would bring the graph to {self.elements}"
                                 f" elements; the limits are {self.limits.max_result_elements} per"
                                 f" node and {self.limits.max_graph_elements} in all (SPEC H5)",
                                 span=node.span,
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
        except LimitError as exc:             # a binary array's declared shape, before decoding
            raise ExprLimitError(f"variable '{name}': {exc.rule}",
                                 input=f"variables.{name}") from None
        except WireError as exc:
            raise ExprError(f"variable '{name}', read as {kind} ({why}): {exc.rule}",
                            input=f"variables.{name}", span=self.p.span(where)) from None
        if kind in ("tensor", "array", "table", "int_array", "bool_mask") and \
                np.size(value) > self.limits.max_array_elements:
            raise ExprLimitError(f"variable '{name}' has {np.size(value)} elements; the limit is"
                                 f" {self.limits.max_array_elements}", input=f"variables.{name}")
        if kind == "tensor":
            rg = True if rg is None else rg
        elif rg:
            raise ExprError(f"variable '{name}' has requires_grad true but is used as {why},"
                            f" which is not differentiable: {NO_GRADIENT_RULE}",
                            input=f"variables.{name}", span=self.p.span(where))
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
            raise self.unknown_name(node)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
                and not isinstance(node.value, bool):
            return self.constant(self._float(node.value, node), node)
        if isinstance(node, ast.UnaryOp):
            literal = self._numeric_literal(node)
            if literal is not None:
                return self.constant(literal, node)
            return self.apply(registry.OPS["neg"], node, [node.operand], [])
        if isinstance(node, ast.BinOp):
            name = BINOPS[type(node.op)]
            if name == "pow" and self._numeric_literal(node.left) is not None \
                    and self._numeric_literal(node.right) is None:
                name = "rpow"  # 2 ** t: a constant base, a differentiable exponent
            op = registry.OPS[name]
            return self.apply(op, node, [node.left, node.right], [])
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in CUTS:
                return self.cut(node)
            if isinstance(node.func, ast.Name):
                op = registry.get(node.func.id)
                if op is None:
                    raise self.error(not_an_op(node.func.id), node.func)
                return self.apply(op, node, node.args, node.keywords)
            op = registry.OPS[METHODS[node.func.attr]]
            args: list[ast.AST] = list(node.args)
            one_number = len(args) == 1 and self._numeric_literal(args[0]) is not None
            if op.name in ("reshape", "transpose") and (len(args) > 1 or one_number):
                args = [ast.Tuple(elts=args, ctx=ast.Load(), **_pos_of(args))]   # t.reshape(2, 3)
            return self.apply(op, node, [node.func.value, *args], node.keywords)
        if isinstance(node, ast.Attribute):                                     # .T
            return self.apply(registry.OPS["transpose"], node, [node.value], [])
        if isinstance(node, ast.Subscript):
            return self.apply(registry.OPS["getitem"], node, [node.value, node.slice], [])
        raise self.error(f"{_what(node)} cannot stand for a tensor here; pass arrays as"
                         " variables", node)

    def cut(self, node: ast.Call) -> int:
        """``detach(e)`` / ``no_grad(e)``: e's value, cut from the graph (no gradient flows
        back through it; the node does not require grad)."""
        name = node.func.id
        if len(node.args) != 1 or node.keywords:
            raise self.error(f"{name}(...) takes one tensor expression, e.g. {name}(x * w)", node)
        inner = self.expr(node.args[0])
        return self.add(Node(0, name, self.p.span(node), self.p.text(node),
                             self.nodes[inner].shape, False, args=[NodeArg(inner)]))

    def _float(self, v: int | float, node: ast.AST) -> float:
        try:
            return float(v)
        except OverflowError:
            raise self.error("the number is too large for float64", node) from None

    def _numeric_literal(self, node: ast.AST) -> float | None:
        """A numeric literal, maybe negated: 2, -1.5, inf, -inf, nan; else None."""
        if isinstance(node, ast.UnaryOp):
            inner = self._numeric_literal(node.operand)
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
        number = self._numeric_literal(node)
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
        if isinstance(node, ast.Name) and node.id not in self.variables:
            raise self.unknown_name(node)
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
                kind = "bool_mask" if _is_mask(raw) else "int_array"
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
        values: list[Arg] = []
        for spec in op.inputs:
            if spec.name not in bound:
                values.append(LiteralArg(spec.default))
                continue
            arg, why = bound[spec.name], f"input '{spec.name}' of {op.name}"
            if spec.kind == "tensor":
                values.append(NodeArg(self.expr(arg)))
            elif spec.kind in ("array", "table"):
                if isinstance(arg, ast.Name) and arg.id in self.variables:
                    ref = self.variable(arg.id, spec.kind, arg, why)
                else:
                    ref = self.expr(arg)
                if self.nodes[ref].requires_grad:
                    hint = "; for a differentiable exponent write exp(b * log(a))" \
                        if op.name == "pow" else ""
                    raise self.error(f"{why} is a constant and gets no gradient, but this"
                                     f" expression requires grad: {NO_GRADIENT_RULE}{hint}", arg)
                values.append(NodeArg(ref))
            elif spec.kind == "index":
                index, refs = self.index(arg)
                values.append(IndexArg(index, tuple(refs)))
            elif isinstance(arg, ast.Name) and arg.id in self.variables and \
                    spec.kind in ("int_array", "bool_mask", "number", "int"):
                values.append(NodeArg(self.variable(arg.id, spec.kind, arg, why)))
            else:
                values.append(LiteralArg(self._coerce(spec.kind, spec.name,
                                                      self.literal(arg, why), arg)))
        return self.add_op(op, node, values, bound)

    def add_op(self, op: Op, node: ast.AST, values: list[Arg],
               bound: dict[str, ast.AST]) -> int:
        plan_args = {}
        for spec, arg in zip(op.inputs, values, strict=True):
            if isinstance(arg, IndexArg):
                plan_args[spec.name] = arg.index
            elif isinstance(arg, LiteralArg):
                plan_args[spec.name] = arg.value
            elif spec.kind in ("tensor", "array", "table"):
                plan_args[spec.name] = registry.probe(self.nodes[arg.id].shape)
            else:
                plan_args[spec.name] = self.nodes[arg.id].value
        span, text = self.p.span(node), self.p.text(node)
        try:
            plan = op.plan(plan_args)
            registry.check_limits(plan, self.limits)
        except LimitError as exc:
            raise ExprLimitError(f"`{text[:60]}`: {exc}", span=span, position=span[0],
                                 op=op.name) from None
        except ShapeError as exc:                  # points at the argument that breaks it
            arg = bound.get(exc.input.split(",")[0])
            where = self.p.span(arg) if arg is not None else span
            name = arg.id if isinstance(arg, ast.Name) and arg.id in self.variables else None
            raise ExprShapeError(f"`{text[:60]}`: {op_message(op.name, str(exc))}", span=where,
                                 position=where[0], op=op.name,
                                 input=f"variables.{name}" if name else "expression") from None
        except InputError as exc:                  # a wrong value (a count below 1): 422
            where = self.p.span(bound[exc.input]) if exc.input in bound else span
            raise ExprError(op_message(op.name, str(exc)), span=where, position=where[0],
                            op=op.name) from None
        except (*NUMPY_ERRORS, MemoryError) as exc:
            raise compute_refusal(op, text, span, exc, self.blame(op, bound, exc)) from None
        self.madds += plan.madds
        self.intermediates += sum(n for _, n in plan.sizes)
        # the forward's share: a plan counts each product 3× (forward + the backward's two,
        # glassllm.shapes.matmul_cost) and lists the arrays built inside (erring high)
        self.forward_work += plan.madds // 3 + sum(n for _, n in plan.sizes)
        if self.madds > self.limits.max_matmul_madds:
            raise ExprLimitError(f"the matmuls would take {self.madds} multiply-adds; the limit"
                                 f" is {self.limits.max_matmul_madds} (SPEC H5)", span=span,
                                 op=op.name)
        rg = op.output == "tensor" and any(
            self.nodes[arg.id].requires_grad for arg, spec in zip(values, op.inputs, strict=True)
            if isinstance(arg, NodeArg) and spec.kind == "tensor")
        return self.add(Node(0, op.name, span, text, tuple(plan.shape), rg, args=values,
                             summed=dict(plan.summed), built=sum(n for _, n in plan.sizes)))


    def blame(self, op: Op, bound: dict[str, ast.AST], exc: BaseException
              ) -> tuple[int, int] | None:
        """The span of the argument an index or axis error is about: the op's `axis` for
        an AxisError, its index / ids / targets for an IndexError; None: the whole call."""
        if isinstance(exc, np.exceptions.AxisError):
            args = [bound[n] for n in ("axis", "axes") if n in bound]
        elif isinstance(exc, IndexError):
            args = [bound[i.name] for i in op.inputs
                    if i.kind in ("index", "int_array", "bool_mask") and i.name in bound]
        else:
            return None
        return self.p.span(args[0]) if len(args) == 1 else None


def compute_refusal(op: Op, text: str, span: tuple[int, int], exc: BaseException,
                    where: tuple[int, int] | None = None) -> ExprError:
    """An op's refusal of its values (an `ExprComputeError`, 400), pointing at `where`
    (the argument: an id, target, index or axis) or else at the whole call.

    Only NumPy's own errors are labelled as NumPy's: code ``numpy_error`` and NumPy's
    exception name (``AxisError: …``). glassllm's own checks of the same rules, made
    before NumPy runs (a shape rule, an id or target out of range), keep their message
    without a NumPy label, code ``invalid_value``."""
    where = where or span
    if isinstance(exc, MemoryError) or not raised_by_glassllm(exc):
        numpy_says = f"{type(exc).__name__}: {exc}"
        return ExprComputeError(f"`{text[:60]}`: {op_message(op.name, numpy_says)}",
                                span=where, position=where[0], op=op.name)
    return ExprComputeError(f"`{text[:60]}`: {op_message(op.name, str(exc))}",
                            code="invalid_value", span=where, position=where[0], op=op.name)


def _is_mask(raw: Any) -> bool:
    """Whether an index variable is a boolean mask (else an integer index array), in O(depth)
    without walking or decoding the array: a binary array (``{"dtype", "shape", "base64"}``,
    H3) by its ``dtype``, a JSON value by the type of its first leaf. Both forms of the same
    array are read alike (a base64 ``bool`` mask is a mask, as ``[true, false]`` is)."""
    if is_base64(raw):
        return raw.get("dtype") == "bool"
    while isinstance(raw, list) and raw:
        raw = raw[0]
    return isinstance(raw, bool)


def _pos_of(nodes: list[ast.AST]) -> dict:
    return {"lineno": nodes[0].lineno, "col_offset": nodes[0].col_offset,
            "end_lineno": nodes[-1].end_lineno, "end_col_offset": nodes[-1].end_col_offset}


def _what(node: ast.AST) -> str:
    if isinstance(node, ast.Constant):
        return f"the literal {node.value!r}"[:60]
    if isinstance(node, ast.Name):
        return f"the variable '{echo_name(node.id)}'"
    return {ast.Tuple: "a tuple", ast.List: "a list", ast.Slice: "a slice"}.get(
        type(node), type(node).__name__)
