"""The training loop: sample windows of a byte stream, forward, backward, clip, AdamW.

``train`` is what ``glassllm train`` runs; tests call it directly. Everything random
(the weights, the batches) comes from seeded generators, so a seed fixes the run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import numpy as np

from glassllm.layers import GlassLM
from glassllm.optim import AdamW, clip_grad_norm

__all__ = ["TrainResult", "default_corpus", "get_batch", "train"]


def default_corpus() -> str:
    """The small English corpus shipped in ``glassllm/data/corpus.txt`` (no download)."""
    return (resources.files("glassllm") / "data" / "corpus.txt").read_text(encoding="utf-8")


def get_batch(
    data: np.ndarray, batch_size: int, seq_len: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random windows of ``data`` (token ids): inputs and the same windows shifted by one.

    Shapes: data (T,) → ids (B, n), targets (B, n), with targets[b, t] = ids[b, t+1].
    """
    if len(data) < seq_len + 1:
        raise ValueError(f"need at least seq_len + 1 = {seq_len + 1} tokens, got {len(data)}")
    starts = rng.integers(0, len(data) - seq_len, size=batch_size)  # (B,)
    offsets = np.arange(seq_len)  # (n,)
    ids = data[starts[:, None] + offsets]  # (B, n)
    targets = data[starts[:, None] + offsets + 1]  # (B, n)
    return ids, targets


@dataclass
class TrainResult:
    losses: list[float] = field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0


def train(
    model: GlassLM,
    data: np.ndarray,
    steps: int = 300,
    batch_size: int = 8,
    seq_len: int | None = None,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    on_step: Callable[[int, float, float], None] | None = None,
) -> TrainResult:
    """Train ``model`` in place on token ids ``data`` (T,) for ``steps`` AdamW steps.

    Each step: draw B windows of n tokens, loss = mean next-token cross-entropy,
    backward, clip the global gradient norm, AdamW step. ``on_step(step, loss,
    tokens_per_second)`` is called after every step (the CLI's progress bar).
    """
    seq_len = seq_len or model.config.max_seq_len
    rng = np.random.default_rng(seed)
    params = model.parameters()
    optimizer = AdamW(params, lr=lr, weight_decay=weight_decay)
    result = TrainResult()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        ids, targets = get_batch(data, batch_size, seq_len, rng)  # (B, n) each
        optimizer.zero_grad()
        loss = model.loss(ids, targets)  # scalar
        loss.backward()
        clip_grad_norm(params, max_grad_norm)
        optimizer.step()
        result.losses.append(loss.item())
        result.tokens += ids.size
        result.seconds = time.perf_counter() - start
        if on_step is not None:
            on_step(step, result.losses[-1], result.tokens / max(result.seconds, 1e-9))
    return result
