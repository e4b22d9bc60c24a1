"""The size limits of one request (SPEC H5), written once.

The library checks them (`glassllm.sandbox.registry.prepare`, `glassllm.sandbox.expr.evaluate`); the
service builds its one `Limits` from its settings (``glassllm_service/settings.py``), whose
defaults are these.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits"]


@dataclass(frozen=True)
class Limits:
    """Bounds of one op run or expression evaluation; a refusal is a `LimitError` (H5)."""

    max_length: int = 2000                 # characters of an expression
    max_depth: int = 64                    # bracket depth and syntax-tree depth of one
    max_nodes: int = 256                   # nodes of an expression's graph
    max_array_elements: int = 1_000_000    # elements of any one input array
    max_result_elements: int = 4_000_000   # elements of the output and of every intermediate
    max_graph_elements: int = 4_000_000    # elements of an expression's nodes together
    max_matmul_madds: int = 1_000_000_000  # multiply-adds of every matmul, with backward
    max_check_elements: int = 2_000        # elements finite-differenced by an eval's check;
    # check's total work (2 forward passes per checked element) is held to max_matmul_madds
