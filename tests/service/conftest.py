"""What the service's tests share."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def mixed_requests() -> list[tuple[str, dict]]:
    """300 op requests of six kinds: graph ops, ndarray ops, float warnings and refusals."""
    rng = np.random.default_rng(1)
    reqs = []
    for i in range(50):
        x = rng.normal(size=(4, 8))
        reqs += [("softmax", {"inputs": {"a": x.tolist()}}),
                 ("matmul", {"inputs": {"a": x.tolist(), "b": x.T.tolist()}}),
                 ("softmax_np", {"inputs": {"x": x.tolist(), "axis": 0}}),
                 ("log", {"inputs": {"a": [float(i % 3) - 1.0, 1.0]}}),  # warnings
                 ("embedding", {"inputs": {"weight": x.tolist(), "ids": [i % 6]}}),  # 400 or 200
                 ("cross_entropy", {"inputs": {"logits": x.tolist(), "targets": [i % 8] * 4}})]
    return reqs
