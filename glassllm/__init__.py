"""glassllm: a transparent NumPy autograd for seeing how an LLM's math and gradients work.

`from glassllm import Tensor, no_grad` (L0.1); the differentiable ops live in
`glassllm.autograd`, the layers in `glassllm.layers`, and `gradcheck` compares
any op's backward with finite differences.

The package reads in three rings. The book, flat in this folder: `tensor`, `grad_mode`,
`autograd`, `shapes`, `layers`, `modules`, `optim`, `tokenizer`, `errors`, and
`gradients/` (the gradient checks and the split of a gradient by path).
Around it: `fast/` (fused nodes and the key/value cache, tested equal to the book's lines),
`training/` (the loop and its event stream), `sandbox/` (what turns a request into the
book's ops: the op registry, expressions, the wire format) and `apps/` (the ``glassllm``
command and the HTTP client). The book imports nothing from the rings around it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

from glassllm.gradients import GradcheckResult, gradcheck
from glassllm.tensor import Tensor, is_grad_enabled, no_grad

__version__ = "0.1.0"

__all__ = ["GradcheckResult", "Tensor", "__version__", "gradcheck", "is_grad_enabled", "no_grad"]

# Module names that changed with the layout, old → new: the one table of them. Importing
# an old name gives the very module object of the new one (never a second copy), and its
# submodules follow (glassllm.registry.table is glassllm.sandbox.registry.table).
# glassllm.client and glassllm.display stay public names for good; the others are kept
# for this release so that code written against them keeps working.
MOVED: dict[str, str] = {
    "glassllm.client": "glassllm.apps.client",
    "glassllm.display": "glassllm.apps.display",
    "glassllm.cli": "glassllm.apps.cli",
    "glassllm.fused": "glassllm.fast.fused",
    "glassllm.kvcache": "glassllm.fast.kvcache",
    "glassllm.registry": "glassllm.sandbox.registry",
    "glassllm.expr": "glassllm.sandbox.expr",
    "glassllm.wire": "glassllm.sandbox.wire",
    "glassllm.grade": "glassllm.sandbox.compare",
    "glassllm.lessons": "glassllm.course.lesson_requests",
    "glassllm.sandbox.lessons": "glassllm.course.lesson_requests",
    "glassllm.examples": "glassllm.sandbox.examples",
    "glassllm.limits": "glassllm.sandbox.limits",
    "glassllm.runtime": "glassllm.sandbox.runtime",
    "glassllm.float_warnings": "glassllm.sandbox.float_warnings",
    "glassllm.train": "glassllm.training.loop",
    "glassllm.checks": "glassllm.errors",
    "glassllm.gradcheck": "glassllm.gradients.checks",
    "glassllm.gradient_check": "glassllm.gradients.checks",
}


def moved_name(name: str) -> str | None:
    """The new dotted name of an old one (or of a submodule under an old package), else
    None. ``moved_name("glassllm.registry.table")`` is ``"glassllm.sandbox.registry.table"``."""
    head = name
    while head:
        if head in MOVED:
            return MOVED[head] + name[len(head):]
        head = head.rpartition(".")[0]
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module name of `MOVED` and loads it as the new module itself."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = moved_name(fullname) if fullname.startswith("glassllm.") else None
        return None if new is None else importlib.util.spec_from_loader(
            fullname, self, origin=new)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(spec.origin)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module ran when it was imported."""


# First on the meta path: a finder after Python's own would let it load a moved package's
# submodule a second time, under its old name, as a separate module.
if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
# A moved module this file has loaded already is known under its old name at once, so that
# importing the old name binds nothing new: `import glassllm.gradcheck` leaves
# glassllm.gradcheck the function, as it always was.
for _old, _new in MOVED.items():
    if _new in sys.modules:
        sys.modules.setdefault(_old, sys.modules[_new])
