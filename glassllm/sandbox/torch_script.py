"""Copy as PyTorch: a case (an op call or an expression) and glassllm's answer to it as a
PyTorch script that recomputes the value and every gradient and compares them, tensor by
tensor, with glassllm's numbers written into the script — Karpathy's ``cmp()`` of
makemore part 4 (exact, close, the largest difference).

The script defines each glassllm op it uses in PyTorch (float64, every definition the one
docs/library.md gives: ``max`` splits ties as ``amax``, ``linear`` is ``x @ weight``,
``rope`` rotates (even, odd) pairs, ``cross_entropy`` is the mean over rows), builds the
inputs from their exact values (``repr`` of a float64 reads back bit for bit), runs the
expression — the same text; a method (``x.sum(axis=0)``) becomes the op's function, as
glassllm's parser reads it — calls ``backward`` with the same ``grad_output`` and prints
the table; it exits 1 when a tensor is not close. Nothing here imports PyTorch: the
script is text, run wherever PyTorch is (``pip install torch``).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

# each op of the registry this exporter knows, as PyTorch (float64 tensors)
DEFINITIONS = {
    "add": "def add(a, b):\n    return a + b",
    "sub": "def sub(a, b):\n    return a - b",
    "mul": "def mul(a, b):\n    return a * b",
    "div": "def div(a, b):\n    return a / b",
    "neg": "def neg(a):\n    return -a",
    "exp": "def exp(a):\n    return torch.exp(a)",
    "log": "def log(a):\n    return torch.log(a)",
    "sqrt": "def sqrt(a):\n    return torch.sqrt(a)",
    "pow": "def pow(a, exponent):\n    return a ** exponent",
    "rpow": "def rpow(base, exponent):\n    return base ** exponent",
    "matmul": "def matmul(a, b):\n    return a @ b",
    "tsum": "def tsum(a, axis=None, keepdims=False):\n"
            "    return a.sum(dim=axis, keepdim=keepdims) if axis is not None else"
            " (a.sum().reshape([1] * a.dim()) if keepdims else a.sum())",
    "mean": "def mean(a, axis=None, keepdims=False):\n"
            "    return a.mean(dim=axis, keepdim=keepdims) if axis is not None else"
            " (a.mean().reshape([1] * a.dim()) if keepdims else a.mean())",
    "max": "def max(a, axis=None, keepdims=False):  # ties split the gradient, as amax\n"
           "    return torch.amax(a, dim=() if axis is None else axis, keepdim=keepdims)",
    "reshape": "def reshape(a, *dims, shape=None):  # x.reshape(2, 3), reshape(x, (2, 3))\n"
               "    shape = shape if shape is not None else dims[0] if len(dims) == 1 and"
               " isinstance(dims[0], (list, tuple)) else dims\n"
               "    return a.reshape(*shape)",
    "transpose": "def transpose(a, *dims, axes=None):\n"
                 "    axes = axes if axes is not None else dims[0] if len(dims) == 1 and"
                 " isinstance(dims[0], (list, tuple)) else dims\n"
                 "    return a.permute(*(axes or range(a.dim() - 1, -1, -1)))",
    "where": "def where(condition, a, b):\n    return torch.where(condition, a, b)",
    "embedding": "def embedding(weight, ids):\n    return weight[ids]",
    "masked_fill": "def masked_fill(a, mask, value):\n    return a.masked_fill(mask, value)",
    "softmax": "def softmax(a, axis=-1):\n    return torch.softmax(a, dim=axis)",
    "log_softmax": "def log_softmax(a, axis=-1):\n    return torch.log_softmax(a, dim=axis)",
    "sigmoid": "def sigmoid(a):\n    return torch.sigmoid(a)",
    "silu": "def silu(a):\n    return F.silu(a)",
    "relu": "def relu(a):\n    return torch.relu(a)",
    "tanh": "def tanh(a):\n    return torch.tanh(a)",
    "gelu": "def gelu(a, approximate='none'):\n    return F.gelu(a, approximate=approximate)",
    "gelu_tanh": "def gelu_tanh(a):\n    return F.gelu(a, approximate='tanh')",
    "cross_entropy": "def cross_entropy(logits, targets):  # the mean over rows\n"
                     "    return F.cross_entropy(logits, targets)",
    "rope": "def rope(x, cos, sin):  # each (even, odd) pair rotated by its angle\n"
            "    even, odd = x[..., 0::2], x[..., 1::2]\n"
            "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos),"
            " dim=-1).flatten(-2)",
    "repeat_kv": "def repeat_kv(x, repeats):\n"
                 "    return torch.repeat_interleave(x, repeats, dim=1)",
    "rms_norm": "def rms_norm(x, weight, eps=1e-6):\n"
                "    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight",
    "linear": "def linear(x, weight):  # glassllm's weight is (d_in, d_out)\n"
              "    return x @ weight",
    "swiglu": "def swiglu(x, w1, w2, w3):\n    return (F.silu(x @ w1) * (x @ w3)) @ w2",
}
# x.sum() in an expression is tsum(x), as glassllm's parser reads a method
METHODS = {"sum": "tsum", "mean": "mean", "max": "max", "reshape": "reshape",
           "transpose": "transpose", "exp": "exp", "log": "log"}

CMP = '''
def cmp(name, ours, glassllm):
    """Karpathy's cmp: exact, close (rtol 1e-9, atol 1e-12), the largest difference."""
    theirs = torch.tensor(glassllm, dtype=torch.float64)
    if ours is None:
        print(f"{name:24s} | no gradient reached it in PyTorch")
        return False
    ours = ours.detach()
    same_shape = tuple(ours.shape) == tuple(theirs.shape)
    exact = same_shape and torch.equal(ours, theirs)
    close = same_shape and torch.allclose(ours, theirs, rtol=1e-9, atol=1e-12, equal_nan=True)
    diff = (ours - theirs).abs().nan_to_num(0.0).max().item() if same_shape and ours.numel() \\
        else float("nan")
    print(f"{name:24s} | exact: {str(exact):5s} | close: {str(close):5s} | max diff: {diff:.3g}")
    return close
'''


class ExportError(ValueError):
    """The case uses something this exporter cannot write as PyTorch; says what."""


def literal(a: Any) -> str:
    """A float64 array or number as Python literal text that reads back exactly."""
    def item(x: Any) -> str:
        if isinstance(x, list):
            return "[" + ", ".join(item(e) for e in x) + "]"
        if isinstance(x, bool | np.bool_):
            return str(bool(x))
        if isinstance(x, int | np.integer):
            return str(int(x))
        f = float(x)
        return repr(f) if np.isfinite(f) else f'float("{f}")'
    return item(np.asarray(a).tolist())


class _Methods(ast.NodeTransformer):
    """``x.sum(axis=0)`` → ``tsum(x, axis=0)``; ``x.T`` → ``transpose(x)``; other names
    and calls kept; every op called must have a definition."""

    def __init__(self) -> None:
        self.ops: set[str] = set()

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in METHODS:
            name = METHODS[node.func.attr]
            self.ops.add(name)
            return ast.Call(ast.Name(name, ast.Load()), [node.func.value, *node.args],
                            node.keywords)
        if isinstance(node.func, ast.Name) and node.func.id != "float":   # float("-inf")
            if node.func.id not in DEFINITIONS:
                raise ExportError(f"{node.func.id}() has no PyTorch form in this exporter")
            self.ops.add(node.func.id)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "T":
            self.ops.add("transpose")
            return ast.Call(ast.Name("transpose", ast.Load()), [node.value], [])
        return node


def _value_line(name: str, value: Any, kind: str, requires_grad: bool) -> str:
    if kind in ("int_array", "int"):
        return f"{name} = torch.tensor({literal(value)}, dtype=torch.long)"
    if kind == "bool_mask":
        return f"{name} = torch.tensor({literal(np.asarray(value, dtype=bool))})"
    grad = ", requires_grad=True" if requires_grad else ""
    return f"{name} = torch.tensor({literal(value)}, dtype=torch.float64{grad})"


def script(expression: str, variables: Mapping[str, tuple[Any, str, bool]],
           value: Any, grads: Mapping[str, Any], grad_output: Any = None,
           title: str = "") -> str:
    """The PyTorch script of one case.

    Args:
        expression: glassllm's expression text (an op call is ``op(a=a, b=b)``).
        variables: name → (value, kind, requires_grad); kinds as the registry's
            (``tensor``, ``int_array``, ``bool_mask``, ``table`` ...).
        value, grads: glassllm's answer (the numbers the script compares against).
        grad_output: the backward's seed (default: ones, as glassllm's).

    Raises: ExportError naming an op or a construct with no PyTorch form here."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ExportError(f"not an expression: {exc.msg}") from None
    methods = _Methods()
    body = ast.unparse(ast.fix_missing_locations(methods.visit(tree)))
    lines = [f'"""{title or "A glassllm case"}, recomputed by PyTorch and compared with'
             " glassllm's numbers.", "", f"glassllm: {expression}", '"""', "import sys", "",
             "import torch", "import torch.nn.functional as F", "",
             'inf, nan = float("inf"), float("nan")   # the expression\'s constants', ""]
    lines += [DEFINITIONS[op] + "\n" for op in sorted(methods.ops)]
    lines += [CMP, "# the inputs, exactly as glassllm had them"]
    lines += [_value_line(n, v, kind, rg) for n, (v, kind, rg) in variables.items()]
    lines += ["", f"out = {body}"]
    seed = "torch.ones_like(out)" if grad_output is None else \
        f"torch.tensor({literal(grad_output)}, dtype=torch.float64)"
    lines += [f"out.backward({seed})", "", "# glassllm's answer",
              f"glassllm = {{\"value\": {literal(value)},"]
    lines += [f"            {json.dumps('grad ' + n)}: {literal(g)}," for n, g in grads.items()]
    lines += ["}", "ok = [cmp(\"value\", out, glassllm[\"value\"])]"]
    keys = {n: json.dumps("grad " + n) for n in grads}
    lines += [f"ok.append(cmp({keys[n]}, {n}.grad, glassllm[{keys[n]}]))" for n in grads]
    lines += ["print(\"every tensor matches\" if all(ok) else \"MISMATCH\")",
              "sys.exit(0 if all(ok) else 1)", ""]
    return "\n".join(lines)


def op_expression(op: str, inputs: Mapping[str, Any], kinds: Mapping[str, str]) -> tuple[
        str, dict[str, tuple[Any, str]]]:
    """An op call as an expression: tensor-like inputs become variables, the rest (an
    axis, an int, a number, a shape) literals. Returns (expression, {name: (value, kind)})."""
    if op not in DEFINITIONS:
        raise ExportError(f"the op {op!r} has no PyTorch form in this exporter")
    args, variables = [], {}
    for name, value in inputs.items():
        kind = kinds.get(name, "tensor")
        if kind in ("tensor", "array", "int_array", "bool_mask", "table"):
            variables[name] = (value, kind)
            args.append(f"{name}={name}")
        else:
            args.append(f"{name}={literal(value) if value is not None else None}")
    return f"{op}({', '.join(args)})", variables
