"""The backward rule of every registry op, as data (issue 14; HIPS autograd's numpy_vjps).

One line per differentiable input, in the notation of the `Backward:` blocks of
`glassllm.autograd` (PyTorch's derivatives.yaml vocabulary): `g` is the incoming gradient
(shaped like the output), `out` is the result, any other name is an input's forward value.
`unbroadcast(·)` sums a gradient back over broadcast axes (L0.5). The page shows each rule
in the step-through, then the same rule with the step's arrays; `GET /api/v1/ops` serves
them as each op's `vjp`. A composite op (layers) says which primitives it is composed of;
its gradients fall out of the chain rule through them, and `expand=true` on the eval route
shows them node by node.
"""

from __future__ import annotations

__all__ = ["SUM_INVARIANT", "SYMBOL", "VJP"]

_ELEMENTWISE_UNARY = {
    "neg": "-g",
    "exp": "g ⊙ out",
    "log": "g / a",
    "sqrt": "g / (2 ⊙ out)",
    "relu": "where(out ≤ 0, 0, g)",
    "tanh": "g ⊙ (1 − out²)",
    "sigmoid": "g ⊙ out ⊙ (1 − out)",
    "silu": "g ⊙ (s + a ⊙ s ⊙ (1 − s)),  s = sigmoid(a)",
    "gelu": "g ⊙ (Φ(a) + a ⊙ φ(a)),  Φ, φ = the normal cdf, pdf",
    "gelu_tanh": "g ⊙ (½(1 + t) + ½ a (1 − t²) √(2/π)(1 + 3·0.044715 a²)),"
                 "  t = tanh(√(2/π)(a + 0.044715 a³))",
}

VJP: dict[str, dict[str, str]] = {
    "add": {"a": "unbroadcast(g)", "b": "unbroadcast(g)"},
    "sub": {"a": "unbroadcast(g)", "b": "unbroadcast(−g)"},
    "mul": {"a": "unbroadcast(g ⊙ b)", "b": "unbroadcast(g ⊙ a)"},
    "div": {"a": "unbroadcast(g / b)", "b": "unbroadcast(−g ⊙ a / b²)"},
    **{name: {"a": rule} for name, rule in _ELEMENTWISE_UNARY.items()},
    "pow": {"a": "unbroadcast(g ⊙ exponent ⊙ a^(exponent − 1))"},
    "rpow": {"exponent": "unbroadcast(g ⊙ out ⊙ log(base))"},
    "matmul": {"a": "unbroadcast(g @ bᵀ)", "b": "unbroadcast(aᵀ @ g)"},
    "tsum": {"a": "broadcast g back over the summed axes"},
    "mean": {"a": "broadcast g back over the averaged axes, / count"},
    "max": {"a": "g / k at the k maxima of each slice, 0 elsewhere"},
    "reshape": {"a": "g.reshape(a.shape)"},
    "transpose": {"a": "g transposed back (argsort of axes)"},
    "getitem": {"a": "zeros like a, g scatter-added at a[index]"},
    "where": {"a": "unbroadcast(where(condition, g, 0))",
              "b": "unbroadcast(where(condition, 0, g))"},
    "embedding": {"weight": "zeros (V, d), g scatter-added into rows ids"},
    "masked_fill": {"a": "where(mask, 0, g)  (masked positions get no gradient)"},
    "softmax": {"a": "out ⊙ (g − Σ(g ⊙ out))  (Σ along axis)"},
    "log_softmax": {"a": "g − exp(out) ⊙ Σ g  (Σ along axis)"},
    "cross_entropy": {"logits": "g ⊙ (softmax(logits) − one_hot(targets)) / N"},
    "rope": {"x": "rotate g by −θ: (g₀ cos + g₁ sin, −g₀ sin + g₁ cos)"},
    "repeat_kv": {"x": "Σ of g over each head's repeats"},
    "rms_norm": {"x": "weight ⊙ g / r − x ⊙ Σ(x ⊙ weight ⊙ g) / (d · r³),"
                      "  r = √(mean(x²) + eps), Σ over the last axis",
                 "weight": "Σ over leading axes of g ⊙ x / r,  r = √(mean(x²) + eps)"},
    "linear": {"x": "g @ weightᵀ", "weight": "Σ over leading axes of xᵀ @ g"},
    "swiglu": {"x": "composed: both paths, through w1 and w3",
               "w1": "xᵀ @ ((g @ w2ᵀ) ⊙ b ⊙ silu′(a)),  a = x@w1, b = x@w3",
               "w2": "hᵀ @ g,  h = silu(x@w1) ⊙ (x@w3)",
               "w3": "xᵀ @ ((g @ w2ᵀ) ⊙ silu(x@w1))"},
    "attention": {name: "composed: matmul, rope, repeat_kv, masked_fill, softmax"
                  for name in ("x", "wq", "wk", "wv", "wo")},
    "transformer_block": {name: "composed: rms_norm, attention, swiglu, add (the residual)"
                          for name in ("x", "attn_norm", "wq", "wk", "wv", "wo", "ffn_norm",
                                       "w1", "w2", "w3")},
}


# How the formula writes an op (the page's graph labels it so: `× 0.5`, `@`, `Σ`).
SYMBOL: dict[str, str] = {"add": "+", "sub": "−", "mul": "×", "div": "÷", "matmul": "@",
                          "pow": "**", "rpow": "**", "neg": "−", "tsum": "Σ", "transpose": "ᵀ"}

# Why the gradient of the output's sum (the default seed, ones) is zero for every input:
# the sum cannot change however the inputs move. The page says it in one sentence.
SUM_INVARIANT: dict[str, str] = {
    "softmax": "each softmax row sums to 1 whatever its inputs",
    "softmax_np": "each softmax row sums to 1 whatever its inputs",
}
