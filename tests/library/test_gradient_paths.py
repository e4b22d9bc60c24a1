"""A gradient split by path (glassllm.gradients.path_shares): for tied input and output
embeddings, a residual (skip and block), repeat_kv's K/V shared by query heads and a
diamond, each part equals NumPy arithmetic written here, and the parts add up to the
tensor's gradient.

The rounding bound: k float64 arrays added in any order stay within (k - 1)·2⁻⁵³·Σ|part|
of their exact sum, elementwise (Higham, Accuracy and Stability of Numerical Algorithms,
§4.2); the engine adds the same arrays, so |Σ parts - grad| is within twice that. The
walk adds them in the engine's own order, so here they agree exactly, and the test says
both.
"""

from __future__ import annotations

import numpy as np
import pytest

from glassllm import Tensor, layers
from glassllm import autograd as ag
from glassllm.gradients import path_shares

U = 2.0 ** -53
rng = np.random.default_rng(11)


def leaf(*shape):
    return Tensor(rng.normal(size=shape), requires_grad=True)


def assert_adds_up(parts, grad):
    """The parts' sum is the gradient within the bound above, and (the engine's order) exactly."""
    total = sum(p.grad for p in parts)
    bound = 2 * (len(parts) - 1) * U * sum(np.abs(p.grad) for p in parts)
    assert np.all(np.abs(total - grad) <= bound)
    np.testing.assert_array_equal(total, grad)


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_tied_embeddings_the_head_and_the_lookup():
    """logits = W[ids] @ Wᵀ, one table read twice: by the lookup and by the output head."""
    w = leaf(5, 3)
    ids, targets = np.array([0, 3, 3, 1]), np.array([3, 1, 4, 0])
    loss = ag.cross_entropy(ag.matmul(ag.embedding(w, ids), ag.transpose(w)), targets)
    parts = path_shares(loss)[w]
    loss.backward()
    assert sorted(p.op for p in parts) == ["embedding", "transpose"]
    by = {p.op: p for p in parts}
    # NumPy: G = (softmax(logits) - one_hot) / N, the logits' gradient
    e = w.data[ids]                                               # (N, d)
    g = (softmax(e @ w.data.T) - np.eye(5)[targets]) / len(ids)   # (N, V)
    np.testing.assert_allclose(by["transpose"].grad, g.T @ e, rtol=1e-12, atol=1e-15)
    lookup = np.zeros((5, 3))
    np.add.at(lookup, ids, g @ w.data)                            # rows read, scattered back
    np.testing.assert_allclose(by["embedding"].grad, lookup, rtol=1e-12, atol=1e-15)
    assert np.all(by["embedding"].grad[[2, 4]] == 0)              # rows never looked up
    assert_adds_up(parts, w.grad)
    shares = [p.share(w.grad) for p in parts]
    assert sum(shares) == pytest.approx(1.0, abs=1e-12)


def test_a_residual_the_skip_and_the_block():
    """out = x + tanh(x @ w): the skip hands x its gradient unchanged, the block through w."""
    x, w = leaf(2, 3), leaf(3, 3)
    seed = rng.normal(size=(2, 3))
    out = ag.add(x, ag.tanh(ag.matmul(x, w)))
    parts = path_shares(out, seed)[x]
    out.backward(seed)
    by = {p.op: p for p in parts}
    assert set(by) == {"add", "matmul"} and by["add"].slot == 0 and by["matmul"].slot == 0
    np.testing.assert_array_equal(by["add"].grad, seed)                         # the skip
    block = (seed * (1 - np.tanh(x.data @ w.data) ** 2)) @ w.data.T             # the block
    np.testing.assert_allclose(by["matmul"].grad, block, rtol=1e-12, atol=1e-15)
    assert_adds_up(parts, x.grad)
    assert w not in path_shares(ag.add(x, ag.tanh(ag.matmul(x, w))), seed)   # used once


def test_a_transformer_blocks_residual_stream():
    """In a block, x feeds the first residual add and the attention's RMSNorm (x², x · rms);
    the skip's part is the gradient of h = x + attention(...), computed here by NumPy
    through the second residual: g + (the feed-forward's path)."""
    d, h, hkv, n = 8, 4, 2, 3
    cos, sin = layers.rope_angles(n, d // h)
    weights = [leaf(*s) for s in [(d,), (d, d), (d, 4), (d, 4), (d, d), (d,), (d, 6), (6, d),
                                  (d, 6)]]
    x = leaf(1, n, d)
    seed = rng.normal(size=(1, n, d))
    out = layers.transformer_block(x, *weights, h, hkv, cos, sin)
    parts = path_shares(out, seed)[x]
    out.backward(seed)
    assert_adds_up(parts, x.grad)
    skip = [p for p in parts if p.op == "add" and p.slot == 0]
    assert len(skip) == 1
    # NumPy: the gradient of h is g plus g through swiglu(rms_norm(h))
    hh = x.data + layers.attention(layers.rms_norm(Tensor(x.data), weights[0]), *weights[1:5],
                                   h, hkv, cos, sin).data
    ffn_norm, w1, w2, w3 = (t.data for t in weights[5:])
    rms = np.sqrt(np.mean(hh ** 2, axis=-1, keepdims=True) + 1e-6)
    y = hh / rms * ffn_norm
    a, b = y @ w1, y @ w3
    sig = 1 / (1 + np.exp(-a))
    gm = seed @ w2.T
    gy = (gm * b * sig * (1 + a * (1 - sig))) @ w1.T + (gm * a * sig) @ w3.T
    gz = gy * ffn_norm                                               # d/d(hh / rms)
    gh = gz / rms - hh * np.sum(gz * hh, axis=-1, keepdims=True) / (d * rms ** 3)
    np.testing.assert_allclose(skip[0].grad, seed + gh, rtol=1e-10, atol=1e-12)


def test_repeat_kv_which_query_heads_share_a_kv_head():
    """scores = q @ repeat_kv(k, 2)ᵀ: K/V head j is read by query heads 2j and 2j + 1."""
    q, k = leaf(1, 4, 3, 2), leaf(1, 2, 3, 2)
    seed = rng.normal(size=(1, 4, 3, 3))
    scores = ag.matmul(q, ag.transpose(ag.repeat_kv(k, 2), (0, 1, 3, 2)))
    parts = path_shares(scores, seed)[k]
    scores.backward(seed)
    (part,) = parts
    assert part.op == "repeat_kv" and part.by_head.shape == (1, 4, 3, 2)
    # NumPy: query head h hands d(scores_h)/dk_rep_h = seed_hᵀ @ q_h to K/V head h // 2
    per_head = np.einsum("bhqk,bhqd->bhkd", seed, q.data)
    np.testing.assert_allclose(part.by_head, per_head, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(part.grad, per_head[:, 0::2] + per_head[:, 1::2], rtol=1e-12)
    np.testing.assert_array_equal(part.by_head.reshape(1, 2, 2, 3, 2).sum(axis=2), part.grad)
    np.testing.assert_array_equal(part.grad, k.grad)                  # one edge: all of it


def test_a_diamond_and_a_tensor_used_twice_by_one_op():
    """y = exp(x); out = tanh(y) * sigmoid(y): y's two paths meet again at the product.
    And x * x: one op, two edges (slots 0 and 1), each x · g."""
    x = leaf(4)
    y = ag.exp(x).retain_grad()
    seed = rng.normal(size=4)
    out = ag.mul(ag.tanh(y), ag.sigmoid(y))
    parts = path_shares(out, seed)[y]
    out.backward(seed)
    by = {p.op: p for p in parts}
    t, s = np.tanh(y.data), 1 / (1 + np.exp(-y.data))
    np.testing.assert_allclose(by["tanh"].grad, seed * s * (1 - t ** 2), rtol=1e-12)
    np.testing.assert_allclose(by["sigmoid"].grad, seed * t * s * (1 - s), rtol=1e-12)
    assert_adds_up(parts, y.grad)
    assert x not in path_shares(out, seed)             # x itself is read once, by exp
    z = leaf(3)
    sq = ag.mul(z, z)
    (a, b) = path_shares(sq, np.ones(3))[z]
    assert (a.op, a.slot, b.slot) == ("mul", 0, 1)
    np.testing.assert_array_equal(a.grad, z.data)
    np.testing.assert_array_equal(b.grad, z.data)
    sq.backward(np.ones(3))
    assert_adds_up([a, b], z.grad)


def test_the_walk_writes_no_gradient_and_refuses_what_backward_refuses():
    x = leaf(2)
    out = ag.add(x, x)
    path_shares(out, np.ones(2))
    assert x.grad is None
    parts = path_shares(out, np.ones(2))[x]
    assert parts[0].share(np.zeros(2)) is None
    with pytest.raises(ValueError):
        parts[0].grad[0] = 5.0                                    # read-only
    with pytest.raises(RuntimeError, match="does not require grad"):
        path_shares(Tensor([1.0]))
    with pytest.raises(ValueError, match="grad_output"):
        path_shares(out)
