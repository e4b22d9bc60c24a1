"""Evaluating an expression: forward keeping every adjoint, one backward, the report."""

from __future__ import annotations

import keyword
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from glassllm.errors import LimitError, WireError, echo_name
from glassllm.sandbox import registry
from glassllm.sandbox.expr import checking, dead_report, path_shares
from glassllm.sandbox.expr.checking import CheckPlan
from glassllm.sandbox.expr.expand import COMPOSITIONS, EXPANSION_FACTOR, composition
from glassllm.sandbox.expr.expr_errors import ExprComputeError, ExprError, ExprLimitError
from glassllm.sandbox.expr.graph import (
    Builder,
    IndexArg,
    LiteralArg,
    Node,
    NodeArg,
    compute_refusal,
)
from glassllm.sandbox.expr.parser import CONSTANT_NAMES, CUTS, DEFAULT_LIMITS, parse
from glassllm.sandbox.float_warnings import FloatWarnings
from glassllm.sandbox.limits import Limits
from glassllm.sandbox.registry import NO_GRADIENT_RULE, NUMPY_ERRORS
from glassllm.sandbox.wire import coerce, encode_array, is_base64
from glassllm.tensor import Tensor

# --------------------------------------------------------------------------------------
# evaluation: forward keeping every adjoint (retain_grad), one backward, then the report
# --------------------------------------------------------------------------------------

def _forward(nodes: list[Node], leaves: dict[int, Tensor], fw: FloatWarnings | None = None,
             retain: bool = False, rules: Rules = None) -> list[Any]:
    """Run the graph; tensor variables come from `leaves` (constants when absent); `rules`
    replaces some ops' functions for this evaluation only (see `evaluate`)."""
    vals: list[Any] = []
    for n in nodes:
        if n.op == "variable":
            if n.kind in ("tensor", "array", "table"):
                v = leaves[n.id] if n.id in leaves else Tensor(n.value)
            else:
                v = n.value
        elif n.op == "constant":
            v = Tensor(n.value)
        elif n.op in CUTS:                      # detach / no_grad: the value, no graph
            v = vals[n.args[0].id].detach()
        else:
            op = registry.OPS[n.op]
            call = _call_args(op, n, vals)
            if fw is not None:
                fw.where = f" in node {n.id} `{n.text[:40]}`"
            try:
                out = _fn(op, rules)(*call)
            except NUMPY_ERRORS as exc:
                raise compute_refusal(op, n.text, n.span, exc) from None
            v = out if isinstance(out, Tensor) else Tensor(out)   # ndarray ops: constants (L0.2)
            if retain and v.requires_grad:
                v.retain_grad()
        vals.append(v)
    return vals


Rules = Mapping[str, Callable[..., Any]] | None


def _fn(op: registry.Op, rules: Rules) -> Callable[..., Any]:
    """The function that computes `op` in this evaluation: the registry's, unless `rules`
    (one evaluation's explicit replacements, never a global) names another."""
    return op.fn if not rules or op.name not in rules else rules[op.name]


def _call_args(op: registry.Op, n: Node, vals: list[Any],
               own: dict[int, Tensor] | None = None) -> list[Any]:
    """Node n's op's arguments, from the values computed so far; `own` puts a tensor of
    the caller's in some slots (a path's fresh leaves)."""
    call = []
    for slot, (spec, arg) in enumerate(zip(op.inputs, n.args, strict=True)):
        if isinstance(arg, LiteralArg):
            call.append(arg.value)
        elif isinstance(arg, IndexArg):
            call.append(arg.index)
        elif spec.kind in ("array", "table"):
            call.append(vals[arg.id].data)            # a constant (L0.6)
        else:
            call.append(own[slot] if own is not None and slot in own else vals[arg.id])
    return call


def _parts(n: Node, vals: list[Any], grad: np.ndarray,
           rules: Rules = None) -> dict[int, np.ndarray]:
    """What node n's op hands each of its tensor inputs that requires grad, given n's whole
    gradient: the op run once more on fresh leaves, one per slot (``paths``)."""
    op = registry.OPS[n.op]
    own = {slot: Tensor(vals[arg.id].data, requires_grad=True)
           for slot, (spec, arg) in enumerate(zip(op.inputs, n.args, strict=True))
           if isinstance(arg, NodeArg) and spec.kind == "tensor" and vals[arg.id].requires_grad}
    _fn(op, rules)(*_call_args(op, n, vals, own)).backward(grad)
    return {slot: np.zeros(leaf.shape) if leaf.grad is None else leaf.grad
            for slot, leaf in own.items()}


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
            raise ExprError(f"variable name {echo_name(name)!r} must be a Python identifier of"
                            " at most 64 characters, not a keyword, inf, nan or a __dunder__",
                            input="variables")
        rg = None
        if isinstance(spec, Tensor):
            value, rg = spec.data, spec.requires_grad
        elif isinstance(spec, dict) and not is_base64(spec):
            extra = sorted(set(spec) - {"value", "requires_grad"})
            if extra or "value" not in spec:
                raise ExprError(f"variable '{name}' must be {{\"value\": ..., \"requires_grad\":"
                                " true | false} (or the bare value)", input=f"variables.{name}")
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
    """Per tensor input: the axes of the incoming gradient summed to undo broadcasting
    (L0.5), as the op's shape rule planned them."""
    if n.op in ("variable", "constant", *CUTS):
        return []
    op = registry.OPS[n.op]
    return [{"input": arg.id, "summed_axes": list(n.summed.get(spec.name, ()))}
            for spec, arg in zip(op.inputs, n.args, strict=True)
            if isinstance(arg, NodeArg) and spec.kind == "tensor"]


def _nonfinite(a: Any) -> int:
    a = np.asarray(a)
    return int(a.size - np.count_nonzero(np.isfinite(a))) if a.dtype.kind == "f" else 0


def _as_float64(a: Any) -> np.ndarray:
    """An answer array as float64 NumPy, every bit kept (no copy when it is one already)."""
    return np.asarray(a, dtype=np.float64)


@dataclass(frozen=True)
class PreparedExpression:
    """An expression past every check, its graph built and every node planned, nothing
    computed yet (`prepare`); `run` evaluates it. Like the registry's `Prepared`."""

    nodes: list[Node]
    out_id: int
    checked: list[Node]                 # the tensor variables that require grad
    seed: np.ndarray | None             # grad_output, shaped like the output
    check: CheckPlan                    # false: no modes (glassllm.sandbox.expr.checking)
    elements: int                       # elements of the nodes and the ops' intermediates
    madds: int                          # matmul multiply-adds of forward + backward
    check_elements: int = 0             # elements `check` finite-differences
    expand: bool = False                # open composite ops (glassllm.sandbox.expr.expand)
    limits: Limits = DEFAULT_LIMITS     # the bounds every opened composite is held to
    paths: bool = False                 # split shared nodes' gradients by edge
    dead: bool = False                  # report the variables whose gradient is dead
    rules: Rules = None                 # ops computed by other functions (one evaluation)
    given: tuple[str, ...] = ()         # the variables' names as the request gave them

    @property
    def cost(self) -> tuple[int, int]:
        """What `run` will cost, known from the plan before any compute, as the registry's
        `Prepared.cost`: (elements built, multiply-adds). A check adds its forward passes
        (finite differences: 2 per checked element; a forward pass is a third of the
        planned multiply-adds)."""
        passes = self.check.passes(self.check_elements)
        # expand evaluates each composite op again as its composition (a transformer
        # block's nests its attention, written twice): at most 4 more passes each
        opened = 4 * sum(n.op in COMPOSITIONS for n in self.nodes) if self.expand else 0
        # paths run the consumers of shared nodes again, forward and backward: at most
        # the evaluation once more, its expansions included
        again = (1 + opened if self.paths else 0) + (3 if self.dead else 0)
        return (self.elements * (1 + passes + opened + again),
                self.madds + passes * (self.madds // 3) + (opened + again) * self.madds)

    @property
    def answer_elements(self) -> int:
        """Elements of the arrays `run` returns, known before any compute: every node's
        value and, when it requires grad, its gradient; the output's value and each
        variable's gradient again (``value``, ``grads``); with ``check``, each checked
        element's analytic and numeric gradient (the other modes' few numbers too); with
        ``paths``, a part per edge of each shared node; with ``expand``, each composite
        node's expansion, planned as `EXPANSION_FACTOR` times the node's own arrays (with
        ``paths`` twice that)."""
        sizes = [math.prod(n.shape) for n in self.nodes]
        total = sum(sizes) + sum(s for n, s in zip(self.nodes, sizes, strict=True)
                                 if n.requires_grad)
        total += sizes[self.out_id] + sum(sizes[n.id] for n in self.checked)
        total += checking.answer_elements(self.check, self.check_elements)
        if self.paths:
            total += path_shares.answer_elements(self.nodes)
        if self.dead:                     # a few numbers per variable, per reason
            total += 64 * sum(n.op == "variable" for n in self.nodes)
        if self.expand:
            for n in self.nodes:
                factor = EXPANSION_FACTOR.get(n.op, 0) * (2 if self.paths else 1)
                if factor:
                    own = sizes[n.id] + n.built + sum(sizes[i] for arg in n.args
                                                      for i in arg.node_ids())
                    total += factor * own
        return total


def evaluate(expression: str, variables: Any = None, grad_output: Any = None,
             check: Any = False, limits: Limits = DEFAULT_LIMITS, *,
             maybe_bools: bool = True, expand: bool = False, paths: bool = False,
             dead: bool = False, rules: Rules = None) -> dict:
    """Evaluate `expression` forward and backward; the result is the ``/api/v1/eval`` body.

    Args:
        expression: e.g. ``"embedding(weight, ids).sum()"``.
        variables: name → ``{"value": array, "requires_grad": bool}`` or the bare value
            (nested lists in the wire format, NumPy arrays, Tensors). ``requires_grad``
            defaults to true for a variable used as a differentiable tensor (as H2).
        grad_output: the seed of the backward pass, shaped like the output; default ones
            (the gradient of the output's sum, H2).
        check: ``True``: also compare every gradient with central differences
            (`gradcheck`), per variable; ``{"modes": [...], "float32": ..., "eps": ...,
            "seed": ...}``: the checks of `glassllm.sandbox.expr.checking` (finite
            differences, Taylor, adjoint, eps sweep), per mode.
        limits: the bounds (H5); refusals are `ExprLimitError`s.
        maybe_bools: a speed hint for large arrays (see `glassllm.sandbox.wire`); keep True unless
            you know the JSON holds no ``true`` / ``false``.
        expand: give each node of a composite op (cross_entropy, attention, rms_norm,
            swiglu, transformer_block) an ``expansion``: the same evaluation of its
            composition of primitive ops (`glassllm.sandbox.expr.expand`), seeded with the node's
            incoming gradient, so every inner node has a value and a gradient.
        paths: answer ``paths``: each node read by more than one op input (or by
            repeat_kv), its gradient split by those edges
            (`glassllm.sandbox.expr.path_shares`).
        dead: answer ``dead``: every variable whose gradient is missing or dead, with
            the reason and the node where its path was cut
            (`glassllm.sandbox.expr.dead_report`).
        rules: op name → a function computing that op in this evaluation only, forward,
            backward, check and paths alike (the bug zoo's one seam: a rule is swapped
            for one call, never in the registry).

    Raises: `ExprError` (and its kinds: limit, shape, compute) naming the position or input.

    ``evaluate(...)`` is ``run(prepare(...))``: a caller that must know the cost before the
    work (the service's admission) calls the two itself.

    Example:
        >>> r = evaluate("embedding(weight, ids).sum()",
        ...              {"weight": [[0.0, 0.0]] * 4, "ids": [1, 2, 1]})
        >>> r["grads"]["weight"]
        [[0.0, 0.0], [2.0, 2.0], [1.0, 1.0], [0.0, 0.0]]

    Clauses: H2, H3, H5, L0.5, L0.6.
    """
    return run(prepare(expression, variables, grad_output, check, limits,
                       maybe_bools=maybe_bools, expand=expand, paths=paths, dead=dead,
                       rules=rules))


def prepare(expression: str, variables: Any = None, grad_output: Any = None,
            check: Any = False, limits: Limits = DEFAULT_LIMITS, *,
            maybe_bools: bool = True, expand: bool = False,
            paths: bool = False, dead: bool = False, rules: Rules = None) -> PreparedExpression:
    """Every check of `evaluate`, once, before any compute: parse, build the graph with
    every node's shape planned and bounded (H5), grad_output, check's cost.

    Takes `evaluate`'s arguments; raises its `ExprError`s. The result's ``cost`` is the
    planned work, for a caller that admits work by cost (the service's admission).
    """
    check = checking.plan(check)
    if not isinstance(expand, bool):
        raise ExprError("'expand' must be true or false", input="expand")
    if not isinstance(paths, bool):
        raise ExprError("'paths' must be true or false", input="paths")
    if not isinstance(dead, bool):
        raise ExprError("'dead' must be true or false", input="dead")
    builder, out_id = _build(expression, variables, limits, maybe_bools)
    nodes = builder.nodes
    given = tuple(builder.variables)
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
            seed = coerce("tensor", "grad_output", grad_output, maybe_bools=maybe_bools,
                          max_elements=limits.max_result_elements)
        except LimitError as exc:             # a binary seed's declared shape, before decoding
            raise ExprLimitError(str(exc), input="grad_output") from None
        except WireError as exc:
            raise ExprError(str(exc), input="grad_output") from None
        if seed.shape != out_node.shape:
            raise ExprError(f"grad_output has shape {list(seed.shape)} but the output has shape"
                            f" {list(out_node.shape)}", input="grad_output")
    checked = [n for n in nodes if n.op == "variable" and n.kind == "tensor" and n.requires_grad]
    check_elements = sum(math.prod(n.shape) for n in checked)
    if check:
        checking.bound(check, check_elements, builder.forward_work, limits)
    return PreparedExpression(nodes, out_id, checked, seed, check,
                              builder.elements + builder.intermediates, builder.madds,
                              check_elements, expand, limits, paths, dead, rules, given)


def run(prepared: PreparedExpression, *, arrays: bool = False) -> dict:
    """Forward keeping every adjoint, one backward, the check if asked: `evaluate`'s result.

    Trusts `prepared` (`prepare` made it); only NumPy's own refusals of the compute can
    still raise (`ExprComputeError`).

    With ``arrays=True`` the result's ``value`` and ``grads`` are the float64 NumPy arrays
    themselves, not their wire JSON: a caller that writes them in another form (the
    service's ``"encoding": "base64"``, a batch) keeps every bit pattern, where the JSON
    token ``"NaN"`` would drop a NaN's sign and payload (H3). The nodes stay wire JSON.
    """
    nodes, out_id, checked = prepared.nodes, prepared.out_id, prepared.checked
    check, seed = prepared.check, prepared.seed
    fw = FloatWarnings()
    with fw:
        leaves = {n.id: Tensor(n.value, requires_grad=True) for n in checked}
        vals = _forward(nodes, leaves, fw, retain=True, rules=prepared.rules)
        out = vals[out_id]
        if out.requires_grad:
            fw.where = " during backward"
            seed = np.ones_like(out.data) if seed is None else seed
            try:
                out.backward(seed)
            except NUMPY_ERRORS as exc:
                raise ExprComputeError(f"backward: {type(exc).__name__}: {exc}") from None
        report = None
        if check and out.requires_grad:
            fw.where = " during check"
            report = _check(prepared, seed)
        elif check:
            report = {}

        grads_of = [None] * len(nodes)
        for n in nodes:
            if n.requires_grad and out.requires_grad:
                g = vals[n.id].grad
                grads_of[n.id] = np.zeros(n.shape) if g is None else g
        shares = None
        if prepared.paths:
            fw.where = " during paths"
            shares = path_shares.report(nodes, grads_of, lambda n: _parts(
                n, vals, grads_of[n.id], prepared.rules))
        dead = None
        if prepared.dead:
            fw.where = " during dead"
            dead = dead_report.report(nodes, vals, out, seed)
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
    described = [_describe_node(n, vals[n.id], grads_of[n.id], nodes) for n in nodes]
    if prepared.expand:
        for n, d in zip(nodes, described, strict=True):
            opened = _expansion(n, vals, grads_of, nodes, prepared.limits,
                                bool(out.requires_grad), prepared.paths, prepared.rules)
            if opened is not None:
                d["expansion"] = opened
    encode = _as_float64 if arrays else encode_array
    answer = {
        "value": encode(value),
        "shape": list(value.shape),
        "grads": {n.name: encode(grads_of[n.id]) for n in checked
                  if grads_of[n.id] is not None},
        "warnings": fw.messages,
        "output": out_id,
        "nodes": described,
        "first_nonfinite": first,
        "check": report,
    }
    if shares is not None:               # asked for only: the default answer is unchanged
        answer["paths"] = shares
    if dead is not None:
        answer["dead"] = dead
    return answer


def _expansion(n: Node, vals: list[Any], grads_of: list[Any], nodes: list[Node],
               limits: Limits, backward_ran: bool, paths: bool,
               rules: Rules = None) -> dict | None:
    """Node `n` of a composite op, evaluated again as its composition of primitive ops."""
    if n.op not in COMPOSITIONS:
        return None
    op = registry.OPS[n.op]
    args: dict[str, Any] = {}
    differentiable: dict[str, bool] = {}
    for spec, arg in zip(op.inputs, n.args, strict=True):
        if isinstance(arg, LiteralArg):
            args[spec.name] = arg.value
        elif isinstance(arg, NodeArg):
            v = vals[arg.id]
            args[spec.name] = np.asarray(v.data if isinstance(v, Tensor) else v)
            differentiable[spec.name] = spec.kind == "tensor" and nodes[arg.id].requires_grad
    built = composition(n.op, args, differentiable)
    if built is None:
        return None
    expression, variables = built
    seeded = backward_ran and n.requires_grad and any(differentiable.values())
    inner = evaluate(expression, variables, grads_of[n.id] if seeded else None, limits=limits,
                     expand=True, paths=paths, rules=rules)
    inner.pop("check", None)
    return {"expression": expression, **inner}


def _build(expression: str, variables: Any, limits: Limits,
           maybe_bools: bool) -> tuple[Builder, int]:
    """Read the variables, parse, and plan every node (no compute): the builder and the
    output node's id."""
    vars_ = _variables(variables)
    parsed = parse(expression, limits)
    builder = Builder(parsed, vars_, limits, maybe_bools=maybe_bools)
    return builder, builder.expr(parsed.tree.body)


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
                            f" constant ({n.kind}): {NO_GRADIENT_RULE}; write exp(b * log(a)) for a"
                            " differentiable exponent, or set requires_grad false",
                            span=n.span, position=n.span[0], input=f"variables.{n.name}")


def _check(prepared: PreparedExpression, seed: np.ndarray) -> dict:
    """The check of every variable that requires grad (`glassllm.sandbox.expr.checking`)."""
    ids = [n.id for n in prepared.checked]

    def fn(*tensors: Tensor) -> Tensor:
        return _forward(prepared.nodes, dict(zip(ids, tensors, strict=True)),
                        rules=prepared.rules)[prepared.out_id]

    return checking.run(prepared.check, fn, [n.name for n in prepared.checked],
                        [n.value for n in prepared.checked], seed)
