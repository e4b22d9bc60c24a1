"""glassllm: a transparent NumPy autograd for seeing how an LLM's math and gradients work.

`from glassllm import Tensor, no_grad` (L0.1); the differentiable ops live in
`glassllm.autograd`, the layers in `glassllm.layers`, and `gradcheck` compares
any op's backward with finite differences.
"""

from glassllm.gradcheck import GradcheckResult, gradcheck
from glassllm.tensor import Tensor, is_grad_enabled, no_grad

__version__ = "0.1.0"

__all__ = ["GradcheckResult", "Tensor", "__version__", "gradcheck", "is_grad_enabled", "no_grad"]
