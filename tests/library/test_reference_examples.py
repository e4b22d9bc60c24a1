"""The examples of the reference document (SPEC Part L), verbatim, one test each."""

import numpy as np
from paths import REFERENCE, ROOT

from glassllm import Tensor


def test_L3_embedding_scatter_add_and_causal_masked_softmax():
    from glassllm.autograd import embedding, masked_fill, softmax

    weight = Tensor(np.zeros((4, 2)), requires_grad=True)
    embedding(weight, np.array([1, 2, 1])).sum().backward()
    np.testing.assert_array_equal(weight.grad[1], [2.0, 2.0])
    np.testing.assert_array_equal(weight.grad[2], [1.0, 1.0])
    scores = Tensor(np.zeros((3, 3)), requires_grad=True)
    mask = np.triu(np.ones((3, 3), dtype=bool), k=1)
    p = softmax(masked_fill(scores, mask, -np.inf))
    assert np.all(p.data[mask] == 0)
    np.testing.assert_allclose(p.data.sum(-1), 1.0)


def test_L4_stable_softmax_log_softmax_sigmoid_silu():
    from glassllm.autograd import log_softmax, sigmoid, silu, softmax_np

    np.testing.assert_allclose(softmax_np([[1000.0, 1000.0]]), [[0.5, 0.5]])
    np.testing.assert_allclose(
        log_softmax(Tensor([[1000.0, 1000.0]])).data, [[-np.log(2.0), -np.log(2.0)]]
    )
    np.testing.assert_allclose(sigmoid(Tensor([-10000.0, 0.0, 10000.0])).data, [0.0, 0.5, 1.0])
    x = Tensor([0.0], requires_grad=True)
    silu(x).sum().backward()
    np.testing.assert_allclose(x.grad, [0.5])


def test_L5_cross_entropy_and_its_gradient():
    from glassllm.autograd import cross_entropy, cross_entropy_grad

    logits = Tensor([[0.0, 0.0]], requires_grad=True)
    targets = np.array([1], dtype=np.int64)
    loss = cross_entropy(logits, targets)
    np.testing.assert_allclose(loss.data, np.log(2.0))
    loss.backward()
    np.testing.assert_allclose(logits.grad, [[0.5, -0.5]])
    np.testing.assert_allclose(cross_entropy_grad(logits.data, targets), logits.grad)


def test_L6_rope_and_repeat_kv():
    from glassllm.autograd import repeat_kv, rope

    x = Tensor([[1.0, 2.0, 3.0, 4.0]])
    rotated = rope(x, np.zeros((1, 2)), np.ones((1, 2)))
    np.testing.assert_allclose(rotated.data, [[-2.0, 1.0, -4.0, 3.0]])
    heads = Tensor(np.array([1.0, 2.0]).reshape(1, 2, 1, 1), requires_grad=True)
    repeated = repeat_kv(heads, 2)
    np.testing.assert_array_equal(repeated.data.ravel(), [1, 1, 2, 2])
    repeated.sum().backward()
    np.testing.assert_array_equal(heads.grad.ravel(), [2, 2])


def test_the_reference_documents_check_script_passes():
    """The reference document's own check (SPEC.md, checks/reference_examples.py), copied
    verbatim into tests/reference/, run as its authors run it: '4 passed, 0 failed'."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run([sys.executable, str(REFERENCE / "reference_examples.py")],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert res.stdout.strip().splitlines()[-1] == "4 passed, 0 failed", res.stdout + res.stderr
    assert res.returncode == 0
