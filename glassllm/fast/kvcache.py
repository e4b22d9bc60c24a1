"""A key/value cache for ``GlassLM.generate``: each new token runs only its own position.

Without a cache, sampling token t reruns the whole context (n positions) through every
layer, although the keys and values of positions < t have not changed: position s only
ever attends to positions ≤ s (the causal mask), so its k and v are fixed once computed.
The cache keeps, per layer, the RoPE-rotated keys and the values of the positions seen
so far, and a step runs the model's own forward on the new positions only
(``GlassLM.forward(ids, cache=...)``): ``glassllm.layers.attention`` appends their keys
and values to its layer's cache and lets each new query attend to every cached key and
the new ones up to its own:

    scores = q_t · [K_cache; k_t]ᵀ / √dk      (1 query row against t+1 keys)

This is inference only (under ``no_grad``): nothing here is differentiated.

Context window: ``generate`` crops the context to the last ``max_seq_len`` tokens, and
once it slides, every earlier position's hidden state changes (it no longer sees the
dropped tokens), so a cache of the old window is wrong. Past ``max_seq_len`` the cache is
rebuilt from the cropped window each step: the same tokens as without a cache, with the
speed-up only while the text fits in the window.

Shapes (STYLE.md letters): per layer the cache holds k, v of shape (B, Hkv, t, dk).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from glassllm.grad_mode import is_grad_enabled, no_grad
from glassllm.tensor import Tensor

__all__ = ["KVCache", "LayerCache", "next_logits_cached"]


class _Model(Protocol):
    """What the cache needs of a model (a ``GlassLM``, which imports this module for its
    ``generate``): its config, its blocks, and its forward taking a ``cache``."""

    config: Any
    blocks: Sequence[Any]

    def __call__(self, ids: np.ndarray, cache: KVCache | None = None) -> Tensor: ...


class LayerCache:
    """One layer's keys (RoPE applied) and values of the positions seen so far."""

    def __init__(self) -> None:
        self.k: np.ndarray | None = None  # (B, Hkv, t, dk)
        self.v: np.ndarray | None = None  # (B, Hkv, t, dk)

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add the new positions' k, v (B, Hkv, m, dk); return all t+m of each.

        Raises RuntimeError while gradients are recorded: the cached arrays are
        constants, so a gradient would silently stop at them.
        """
        if is_grad_enabled():
            raise RuntimeError("a KV cache is for generation: run the model under no_grad")
        if self.k is not None:
            k = Tensor(np.concatenate([self.k, k.data], axis=2))  # (B, Hkv, t+m, dk)
            v = Tensor(np.concatenate([self.v, v.data], axis=2))
        self.k, self.v = k.data, v.data
        return k, v


class KVCache:
    """Every layer's ``LayerCache`` and the tokens whose keys and values they hold."""

    def __init__(self, model: _Model):
        self.model = model
        self.tokens: list[int] = []  # the positions cached, in order
        self.layers = [LayerCache() for _ in model.blocks]

    @property
    def length(self) -> int:
        """t, the number of positions cached."""
        return len(self.tokens)

    def extend(self, new: list[int]) -> np.ndarray:
        """Run the positions ``new`` after the cached ones; return the last one's logits (V,).

        ids (1, m) at positions t .. t+m-1; each query i attends to keys 0 .. t+i.
        """
        with no_grad():
            logits = self.model(np.array([new]), cache=self)  # (1, m, V)
        self.tokens.extend(new)
        return logits.data[0, -1]  # (V,)


def next_logits_cached(model: _Model) -> Callable[[list[int]], np.ndarray]:
    """A ``tokens → next-token logits (V,)`` function for ``generate`` that keeps a cache.

    Each call must pass the previous call's tokens plus what was appended (as
    ``generate`` does); anything else (or a context past ``max_seq_len``) rebuilds the
    cache from the cropped window, so the answer always equals ``model(window)[0, -1]``
    up to float rounding.
    """
    cache = KVCache(model)
    window = model.config.max_seq_len

    def next_logits(tokens: list[int]) -> np.ndarray:
        nonlocal cache
        t = len(cache.tokens)
        if len(tokens) > window or t == 0 or tokens[:t] != cache.tokens or len(tokens) == t:
            cache = KVCache(model)
            return cache.extend(tokens[-window:])
        return cache.extend(tokens[t:])

    return next_logits
