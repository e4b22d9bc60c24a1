"""The op registry (SPEC H1): the op table and the one request path that runs it.

- `glassllm.sandbox.registry.entry`: what is held per op (`Op`, `Input`, `Example`, `Plan`);
- `glassllm.sandbox.registry.plans`: each op's shape plan, calling the op's own shape rule;
- `glassllm.sandbox.registry.table`: the table itself, `OPS`, in SPEC order;
- `glassllm.sandbox.registry.requests`: `prepare` (every check, once) and `run` (compute only).

Pure Python + NumPy: no web framework here.
"""

from glassllm.errors import LimitError
from glassllm.sandbox.registry.entry import (
    DTYPES,
    NO_GRADIENT_RULE,
    REQUIRED,
    Example,
    Input,
    Op,
    Plan,
)
from glassllm.sandbox.registry.plans import elementwise, same_as
from glassllm.sandbox.registry.requests import (
    NUMPY_ERRORS,
    Prepared,
    RunResult,
    check_limits,
    coerce_inputs,
    compute_error,
    describe,
    example_answer,
    prepare,
    prepare_args,
    run,
)
from glassllm.sandbox.registry.table import OPS, get
from glassllm.shapes import matmul_shape, probe

__all__ = ["DTYPES", "NO_GRADIENT_RULE", "NUMPY_ERRORS", "OPS", "REQUIRED", "Example", "Input",
           "LimitError", "Op", "Plan", "Prepared", "RunResult", "check_limits", "coerce_inputs",
           "compute_error", "describe", "elementwise", "example_answer", "get", "matmul_shape",
           "prepare", "prepare_args", "probe", "run", "same_as"]
