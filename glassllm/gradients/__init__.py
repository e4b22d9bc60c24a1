"""Where a gradient comes from, and whether it is right: the book's gradient tools.

- `glassllm.gradients.checks`: `gradcheck` (central differences per element) and the
  checks that do not hinge on eps: `taylor_test` (the order of the first-order error),
  `adjoint_test` (the dot-product test), `eps_sweep` (the error curve against eps), each
  with a float32 emulation.
- `glassllm.gradients.paths`: `path_shares`, a tensor's gradient split by the paths it
  reaches the output by (tied weights, a residual, K/V shared by query heads, a diamond).
- `glassllm.gradients.dead`: `dead_gradients`, every input whose gradient is missing or
  zero, the reason in words and the op where its path was cut.

Both walk what `Tensor.backward` walks and never change it: a student reads the engine in
glassllm/tensor.py, and these beside it.
"""

from glassllm.gradients.checks import (
    AdjointResult,
    EpsSweep,
    GradcheckResult,
    InputCheck,
    TaylorResult,
    adjoint_test,
    eps_sweep,
    gradcheck,
    taylor_test,
)
from glassllm.gradients.dead import DeadCause, DeadGradient, dead_gradients
from glassllm.gradients.paths import PathShare, path_shares

__all__ = ["AdjointResult", "DeadCause", "DeadGradient", "EpsSweep", "GradcheckResult",
           "InputCheck", "PathShare", "TaylorResult", "adjoint_test", "dead_gradients",
           "eps_sweep", "gradcheck", "path_shares", "taylor_test"]
