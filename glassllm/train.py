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

from glassllm import no_grad
from glassllm.checks import check_int, check_real, id_array
from glassllm.layers import GlassLM
from glassllm.optim import AdamW, clip_grad_norm

__all__ = ["TrainResult", "TrainingDiverged", "default_corpus", "get_batch", "train"]


def default_corpus() -> str:
    """The small English corpus shipped in ``glassllm/data/corpus.txt`` (no download)."""
    return (resources.files("glassllm") / "data" / "corpus.txt").read_text(encoding="utf-8")


def get_batch(
    data: np.ndarray, batch_size: int, seq_len: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random windows of ``data`` (token ids): inputs and the same windows shifted by one.

    Shapes: data (T,) → ids (B, n), targets (B, n), with targets[b, t] = ids[b, t+1].

    Raises: TypeError if batch_size or seq_len is not an int (2.0 and True are not) or
    data holds a non-integer id; ValueError if either is < 1 or data is too short.
    """
    batch_size = check_int("batch_size", batch_size, minimum=1)
    seq_len = check_int("seq_len", seq_len, minimum=1)
    data = id_array(data, "data")
    if len(data) < seq_len + 1:
        raise ValueError(f"need at least seq_len + 1 = {seq_len + 1} tokens, got {len(data)}")
    starts = rng.integers(0, len(data) - seq_len, size=batch_size)  # (B,)
    offsets = np.arange(seq_len)  # (n,)
    ids = data[starts[:, None] + offsets]  # (B, n)
    targets = data[starts[:, None] + offsets + 1]  # (B, n)
    return ids, targets


class TrainingDiverged(FloatingPointError):
    """Raised by ``train`` when the loss, the gradient norm or a weight stops being finite.

    ``step`` is the 1-based step at which it was seen; the model's weights may already be
    damaged, so callers must not save them.
    """

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


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

    Raises ``TrainingDiverged`` as soon as the loss or the gradient norm is not finite
    (before that step's update), or if after the last step a weight, or the loss of the
    last batch recomputed with the final weights, is not finite: a nan/inf run stops
    instead of carrying on to (and the CLI saving) a useless model.

    Counts (steps, batch_size, seq_len, seed) must be ints, not floats or bools, and
    data integer ids in [0, V): TypeError/ValueError naming the input otherwise; lr and
    weight_decay are checked by ``AdamW``.
    """
    steps = check_int("steps", steps, minimum=0)
    seed = check_int("seed", seed, minimum=0)
    max_grad_norm = check_real("max_grad_norm", max_grad_norm, 0.0, strict=True)
    seq_len = model.config.max_seq_len if seq_len is None else seq_len
    data = id_array(data, "data", model.config.vocab)  # (T,), checked once, not per batch
    rng = np.random.default_rng(seed)
    params = model.parameters()
    optimizer = AdamW(params, lr=lr, weight_decay=weight_decay)
    result = TrainResult()
    start = time.perf_counter()
    for step in range(1, steps + 1):
        ids, targets = get_batch(data, batch_size, seq_len, rng)  # (B, n) each
        optimizer.zero_grad()
        loss = model.loss(ids, targets)  # scalar
        if not np.isfinite(loss.item()):
            raise TrainingDiverged(f"the loss is {loss.item()} at step {step} of {steps}", step)
        loss.backward()
        norm = clip_grad_norm(params, max_grad_norm)
        if not np.isfinite(norm):
            raise TrainingDiverged(f"the gradient norm is {norm} at step {step} of {steps}", step)
        optimizer.step()
        result.losses.append(loss.item())
        result.tokens += ids.size
        result.seconds = time.perf_counter() - start
        if on_step is not None:
            on_step(step, result.losses[-1], result.tokens / max(result.seconds, 1e-9))
    for name, p in model.named_parameters():
        if not np.all(np.isfinite(p.data)):
            raise TrainingDiverged(f"weight {name} is not finite after step {steps}", steps)
    if steps >= 1:
        with no_grad():  # finite but huge weights (a finite, absurd lr) can overflow here
            final = model.loss(ids, targets).item()
        if not np.isfinite(final):
            raise TrainingDiverged(f"the loss after step {steps} is {final}", steps)
    return result
