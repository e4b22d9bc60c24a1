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

from glassllm.errors import check_int, check_real, id_array
from glassllm.grad_mode import no_grad
from glassllm.modules import GlassLM
from glassllm.training.stream import TrainingDiverged, get_batch, train_steps

__all__ = [  # TrainingDiverged, get_batch: training.py
    "TrainResult",
    "corpus_text",
    "default_corpus",
    "read_corpus",
    "train",
]

_BOM = "\ufeff"
"""U+FEFF, the byte-order mark: EF BB BF at the start of a UTF-8 file marks its encoding."""


def corpus_text(text: str) -> str:
    """A training corpus as the model sees it, the same for ``glassllm train`` and
    ``POST /api/v1/train``: the text itself, byte for byte (line ends stay as they are:
    CRLF is two tokens, 13 and 10), but for one leading byte-order mark, which marks the
    file's encoding and is not text (as Python's ``utf-8-sig`` and browsers read it).

    Raises ValueError when the text holds a lone surrogate, which is not UTF-8 (a JSON
    string can carry one: ``"\\ud800"``), naming its position.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"is not UTF-8 text: a lone surrogate at character {exc.start}") \
            from None
    return text.removeprefix(_BOM)


def read_corpus(path) -> str:
    """The corpus in the file at ``path``, read as bytes (never in text mode, which would
    turn CRLF into LF) and decoded as UTF-8, then `corpus_text`.

    Raises ValueError naming the offset of the first byte that is not UTF-8 (no guessing
    of another encoding); OSError as ``open`` does.
    """
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 text: byte {exc.start} is 0x{data[exc.start]:02x}"
                         f" ({exc.reason})") from None
    return corpus_text(text)


def default_corpus() -> str:
    """The small English corpus shipped in ``glassllm/training/data/corpus.txt`` (no download),
    read as `read_corpus` reads any corpus."""
    with resources.as_file(resources.files("glassllm.training") / "data" / "corpus.txt") as path:
        return read_corpus(path)


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
    optimizer: str = "adamw",
) -> TrainResult:
    """Train ``model`` in place on token ids ``data`` (T,) for ``steps`` AdamW steps.

    Each step: draw B windows of n tokens, loss = mean next-token cross-entropy,
    backward, clip the global gradient norm, AdamW (or ``optimizer="sgd"``) step. The
    loop is ``glassllm.training.stream.train_steps``, which the sandbox's /api/v1/train runs
    too. ``on_step(step, loss, tokens_per_second)`` is called after every step (the
    CLI's progress bar).

    Raises ``TrainingDiverged`` as soon as the loss or the gradient norm is not finite
    (before that step's update), or if after the last step a weight, or the loss of the
    first batch recomputed with the final weights, is not finite: a nan/inf run stops
    instead of carrying on to (and the CLI saving) a useless model.

    Counts (steps, batch_size, seq_len, seed) must be ints, not floats or bools, and
    data integer ids in [0, V): TypeError/ValueError naming the input otherwise; lr and
    weight_decay are checked by ``AdamW``.
    """
    steps = check_int("steps", steps, minimum=0)
    seed = check_int("seed", seed, minimum=0)
    max_grad_norm = check_real("max_grad_norm", max_grad_norm, 0.0, strict=True)
    data = id_array(data, "data", model.config.vocab)  # (T,), checked once, not per batch
    result = TrainResult()
    start = time.perf_counter()
    steps_run = train_steps(model, data, steps=steps, batch_size=batch_size, seq_len=seq_len,
                            lr=lr, weight_decay=weight_decay, max_grad_norm=max_grad_norm,
                            seed=seed, optimizer=optimizer)
    for info in steps_run:  # glassllm.training.stream.train_steps: the loop the service runs too
        result.losses.append(info.loss)
        result.tokens = info.tokens
        result.seconds = time.perf_counter() - start
        if on_step is not None:
            on_step(info.step, info.loss, result.tokens / max(result.seconds, 1e-9))
    for name, p in model.named_parameters():
        if not np.all(np.isfinite(p.data)):
            raise TrainingDiverged(f"weight {name} is not finite after step {steps}", steps)
    if steps >= 1:
        ids, targets = get_batch(data, batch_size, seq_len or model.config.max_seq_len,
                                 np.random.default_rng(seed))  # a batch to recompute
        with no_grad():  # finite but huge weights (a finite, absurd lr) can overflow here
            final = model.loss(ids, targets, fused=True).item()  # as train_steps runs it
        if not np.isfinite(final):
            raise TrainingDiverged(f"the loss after step {steps} is {final}", steps)
    return result
