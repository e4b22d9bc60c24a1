"""The client's "Copy as PyTorch": a case run by the sandbox, written as a PyTorch script
that recomputes its value and every gradient and prints, tensor by tensor, exact / close
/ the largest difference against the sandbox's numbers written into it
(glassllm.sandbox.torch_script; docs/client.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from glassllm.sandbox.torch_script import op_expression, script


class TorchCalls:
    """``Sandbox.torch_script``: the blocking client's; it reads the op table once."""

    def torch_script(self, op: str | None = None, inputs: Mapping[str, Any] | None = None, *,
                     expression: str | None = None, variables: Mapping[str, Any] | None = None,
                     requires_grad: Sequence[str] | None = None,
                     grad_output: Any = None) -> str:
        """The PyTorch script of an op call (`op`, `inputs`) or an expression
        (`expression`, `variables`), with the sandbox's answer to compare against.

        Raises: ValueError unless exactly one of `op` and `expression` is given;
        ExportError (a ValueError) for an op or a construct with no PyTorch form; the
        sandbox's own errors as every call does."""
        if (op is None) == (expression is None):
            raise ValueError("torch_script needs exactly one of op= (with inputs=) or expression=")
        if op is not None:
            kinds = getattr(self, "_torch_kinds", None)
            if kinds is None:
                kinds = {o["name"]: {i["name"]: i["kind"] for i in o["inputs"]}
                         for o in self.ops()}
                self._torch_kinds = kinds
            result = self.op(op, inputs or {}, requires_grad, grad_output, encoding="base64")
            expression, found = op_expression(op, dict(inputs or {}), kinds.get(op, {}))
            named = {n: (np.asarray(v), kind, n in result.grads)
                     for n, (v, kind) in found.items()}
        else:
            result = self.eval(expression, variables, grad_output, encoding="base64")
            nodes = {n["name"]: n for n in result.raw.get("nodes", []) if n["op"] == "variable"}
            named = {}
            for name, v in (variables or {}).items():
                value = v["value"] if isinstance(v, Mapping) and "value" in v else v
                kind = nodes.get(name, {}).get("kind", "tensor")
                named[name] = (np.asarray(value), kind, name in result.grads)
        return script(expression, named, result.value, result.grads, grad_output,
                      title=f"glassllm's {op or 'expression'}")
