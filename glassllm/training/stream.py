"""A training run as a stream of events, weights as JSON, attention and its gradients.

Three things the sandbox's Train view needs, in the library so the CLI, the service and
the tests share them:

* ``train_steps`` is *the* training loop (``glassllm.training.loop.train``, which ``glassllm
  train`` runs, consumes it too), and ``train_events`` wraps it for a page: a ``start``
  event, one ``step`` event per step (the loss), a ``stats`` event every ``every`` steps
  (gradient norm per parameter group, learning rate, a short sample) and a ``done``
  event with the final weights. Same seed and settings → the same loss curve, bit for
  bit, whoever runs it.
* ``encode_weights`` / ``decode_weights``: a model as a JSON-safe dict (config + each
  parameter as base64 of its little-endian float64 bytes with its shape), so a stateless
  service can hand the weights to the page and take them back.
* ``attention_maps``: for a prompt, every layer's and head's attention probabilities
  P (H, n, n) and ∂loss/∂P, the gradient of the prompt's next-token loss.

Shape letters (STYLE.md): B batch · n sequence length · d width · H heads · V vocabulary.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from glassllm.autograd import cross_entropy, getitem
from glassllm.errors import check_int, id_array
from glassllm.gradients.dead import dead_parameters
from glassllm.layers import ATTENTION_PROBE, GlassConfig
from glassllm.modules import GlassLM
from glassllm.optim import SGD, AdamW, clip_grad_norm
from glassllm.tensor import Tensor
from glassllm.tokenizer import ByteTokenizer

__all__ = [
    "OPTIMIZERS",
    "StepInfo",
    "TrainingDiverged",
    "WeightsError",
    "attention_maps",
    "count_parameters",
    "decode_weights",
    "encode_weights",
    "get_batch",
    "next_token_loss",
    "param_group",
    "sample",
    "train_events",
    "train_steps",
]

OPTIMIZERS = ("adamw", "sgd")
"""``adamw``: AdamW(betas 0.9, 0.999, weight_decay); ``sgd``: SGD with momentum 0.9."""
SAMPLE_PROMPT = "The "
SAMPLE_TOKENS = 48
WEIGHTS_FORMAT = "glassllm-weights/1"
MAX_SEQ_LEN = 512  # the longest context decode_weights accepts (attention is n × n)


class TrainingDiverged(FloatingPointError):
    """The loss, the gradient norm or a weight stopped being finite at ``step`` (1-based).

    The model's weights may already be damaged, so callers must not save them.
    """

    def __init__(self, message: str, step: int):
        super().__init__(message)
        self.step = step


class WeightsError(ValueError):
    """Weights that ``decode_weights`` refuses; ``input`` names the field (H4)."""

    def __init__(self, input: str, message: str):
        super().__init__(message)
        self.input = input


def param_group(name: str) -> str:
    """The group of a parameter for gradient norms: its module, ``blocks.0.attn.wq`` →
    ``blocks.0.attn``; ``tok_emb.weight`` → ``tok_emb``."""
    return name.rsplit(".", 1)[0]


@dataclass
class StepInfo:
    """One optimizer step: the loss of its batch and the gradient norm before clipping.

    ``group_norms`` (group → L2 norm of its gradients, before clipping) and ``dead``
    (the parameters that got no gradient somewhere in this step, `dead_parameters`: the
    embedding's rows of the ids not in the batch, a ReLU-free model's only usual case)
    are filled on the steps asked for (``every``), else None.
    """

    step: int
    loss: float
    grad_norm: float
    tokens: int
    group_norms: dict[str, float] | None = None
    dead: list[dict] | None = None


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
    if data.ndim != 1:
        raise ValueError(f"data must be one token stream (T,), got shape {data.shape}: join "
                         "the documents of a batch into one stream first")
    if len(data) < seq_len + 1:
        raise ValueError(f"need at least seq_len + 1 = {seq_len + 1} tokens, got {len(data)}")
    starts = rng.integers(0, len(data) - seq_len, size=batch_size)  # (B,)
    offsets = np.arange(seq_len)  # (n,)
    return data[starts[:, None] + offsets], data[starts[:, None] + offsets + 1]


def train_steps(
    model: GlassLM,
    data: np.ndarray,
    steps: int = 300,
    batch_size: int = 8,
    seq_len: int | None = None,
    lr: float = 3e-3,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    optimizer: str = "adamw",
    every: int = 0,
) -> Iterator[StepInfo]:
    """Train ``model`` in place on token ids ``data`` (T,), yielding after every step.

    Each step: draw B windows of n tokens from ``np.random.default_rng(seed)``, loss =
    mean next-token cross-entropy, backward, clip the global gradient norm to
    ``max_grad_norm``, optimizer step. The model runs with ``fused=True``: its
    rms_norm, attention and swiglu as one node each with a hand-written backward
    (``glassllm.fast.fused``), the same math as their composed lines, faster. With ``every``
    = K > 0, steps K, 2K, … and the last also carry the gradient norm of each parameter
    group (before clipping).

    Raises:
        ValueError: ``optimizer`` not in ``OPTIMIZERS``; ``data`` shorter than n + 1.
        TrainingDiverged: the loss or the gradient norm is not finite (before that
            step's update).
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {optimizer!r}")
    seq_len = seq_len or model.config.max_seq_len
    rng = np.random.default_rng(seed)
    named = list(model.named_parameters())
    params = [p for _, p in named]
    if optimizer == "adamw":
        opt: AdamW | SGD = AdamW(params, lr=lr, weight_decay=weight_decay)
    else:
        opt = SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    tokens = 0
    for step in range(1, steps + 1):
        ids, targets = get_batch(data, batch_size, seq_len, rng)  # (B, n) each
        opt.zero_grad()
        loss = model.loss(ids, targets, fused=True)  # scalar, through the fused layers
        value = loss.item()
        if not np.isfinite(value):
            raise TrainingDiverged(f"the loss is {value} at step {step} of {steps}", step)
        loss.backward()
        groups = dead = None
        if every and (step % every == 0 or step == steps):
            dead = dead_parameters(named)               # before clipping and the update
            sq: dict[str, float] = {}
            for name, p in named:
                if p.grad is not None:
                    key = param_group(name)
                    sq[key] = sq.get(key, 0.0) + float(np.sum(p.grad * p.grad))
            groups = {k: math.sqrt(v) for k, v in sq.items()}
        norm = clip_grad_norm(params, max_grad_norm)
        if not np.isfinite(norm):
            raise TrainingDiverged(f"the gradient norm is {norm} at step {step} of {steps}", step)
        opt.step()
        tokens += ids.size
        yield StepInfo(step, value, norm, tokens, groups, dead)


def count_parameters(config: GlassConfig) -> int:
    """Number of weights of a ``GlassLM(config)``, from the config alone (no allocation).

    V·d (embedding) + L·(2d + d·H·dk + 2·d·Hkv·dk + H·dk·d + 3·d·F) + d + d·V.
    """
    d, H, Hkv, F, V = (config.d_model, config.n_heads, config.n_kv_heads, config.ffn_hidden,
                       config.vocab)
    dk = d // H
    block = 2 * d + d * H * dk + 2 * d * Hkv * dk + H * dk * d + 3 * d * F
    return V * d + config.n_layers * block + d + d * V


def train_events(
    config: GlassConfig,
    corpus: str,
    steps: int = 300,
    lr: float = 3e-3,
    batch: int = 8,
    seed: int = 0,
    optimizer: str = "adamw",
    every: int = 25,
    weight_decay: float = 0.01,
    max_grad_norm: float = 1.0,
) -> Iterator[dict[str, Any]]:
    """A training run of ``GlassLM(config with seed=seed)`` on ``corpus`` as events.

    Events (dicts, JSON-safe; ``time`` is ``time.time()`` when the event was made):
      ``{"event": "start", "steps", "parameters", "corpus_bytes", "config"}``
      ``{"event": "step", "step", "loss", "grad_norm", "time"}`` after every step
      ``{"event": "stats", "step", "lr", "grad_norms": {group: norm}, "dead", "sample",
      "time"}`` (``dead``: the parameters with no gradient somewhere, `dead_parameters`)
          every ``every`` steps and after the last (norms before clipping; sample: 48
          bytes after "The ", temperature 0.8, the same rng seed each time, so only the
          model changes between samples)
      ``{"event": "done", "step", "loss", "seconds", "weights"}`` (``encode_weights``)

    The weights and the batches come from ``seed`` (the model's seed is replaced by it),
    as ``glassllm train --seed`` does, so the same arguments give the CLI's loss curve bit
    for bit. Closing the generator stops the run between two steps.

    Raises:
        ValueError: the corpus is shorter than max_seq_len + 1 bytes; a bad optimizer.
        TrainingDiverged: a non-finite loss or gradient norm.
    """
    config = dataclasses.replace(config, seed=seed)
    data = ByteTokenizer().encode(corpus)  # (T,)
    if len(data) < config.max_seq_len + 1:
        raise ValueError(f"the corpus has {len(data)} bytes; training windows need at least "
                         f"max_seq_len + 1 = {config.max_seq_len + 1}")
    model = GlassLM(config)
    yield {"event": "start", "steps": steps, "parameters": count_parameters(config),
           "corpus_bytes": len(data), "config": asdict(config), "time": time.time()}
    start = time.perf_counter()
    info = None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for info in train_steps(model, data, steps=steps, batch_size=batch, lr=lr,
                                weight_decay=weight_decay, max_grad_norm=max_grad_norm,
                                seed=seed, optimizer=optimizer, every=every):
            yield {"event": "step", "step": info.step, "loss": info.loss,
                   "grad_norm": info.grad_norm, "time": time.time()}
            if info.group_norms is not None:
                yield {"event": "stats", "step": info.step, "lr": lr,
                       "grad_norms": info.group_norms, "dead": info.dead,
                       "sample": sample(model, seed),
                       "time": time.time()}
    yield {"event": "done", "step": info.step if info else 0,
           "loss": info.loss if info else None, "seconds": time.perf_counter() - start,
           "weights": encode_weights(model), "time": time.time()}


def sample(model: GlassLM, seed: int = 0, prompt: str = SAMPLE_PROMPT,
           tokens: int = SAMPLE_TOKENS) -> str:
    """A short continuation of ``prompt`` (temperature 0.8, KV cache), decoded as text."""
    tok = ByteTokenizer()
    with np.errstate(over="ignore", invalid="ignore"):
        ids = model.generate(tok.encode(prompt), tokens, temperature=0.8,
                             rng=np.random.default_rng(seed))
    return tok.decode(ids)


# ---------------------------------------------------------------------------------------
# Weights as JSON
# ---------------------------------------------------------------------------------------


def encode_weights(model: GlassLM) -> dict[str, Any]:
    """The model as a JSON-safe dict: ``{"format", "config", "tensors": {name: {"shape",
    "data"}}}`` where data is base64 of the parameter's little-endian float64 bytes.

    Exact: ``decode_weights(encode_weights(m))`` has bit-identical weights.
    """
    tensors = {
        name: {"shape": list(p.data.shape),
               "data": base64.b64encode(np.ascontiguousarray(p.data, dtype="<f8")).decode()}
        for name, p in model.named_parameters()
    }
    return {"format": WEIGHTS_FORMAT, "config": asdict(model.config), "tensors": tensors}


def _config(raw: Any) -> GlassConfig:
    if not isinstance(raw, dict):
        raise WeightsError("weights.config", "weights.config must be an object of "
                                             "GlassConfig fields")
    known = {f.name: f.type for f in fields(GlassConfig)}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise WeightsError("weights.config", f"weights.config has unknown field(s) {unknown}")
    for key, value in raw.items():
        want_int = known[key] == "int"
        ok = (isinstance(value, int) and not isinstance(value, bool)) if want_int else (
            isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)
        if not ok or (want_int and value < (0 if key == "seed" else 1)):
            rule = "a positive integer" if want_int else "a finite number > 0"
            raise WeightsError(f"weights.config.{key}",
                               f"weights.config.{key} must be {rule}; got {value!r}")
    if raw.get("vocab", ByteTokenizer.vocab_size) != ByteTokenizer.vocab_size:
        raise WeightsError("weights.config.vocab", f"weights.config.vocab must be "
                           f"{ByteTokenizer.vocab_size} (the byte-level tokenizer); "
                           f"got {raw['vocab']!r}")
    if raw.get("max_seq_len", 0) > MAX_SEQ_LEN:
        raise WeightsError("weights.config.max_seq_len", f"weights.config.max_seq_len must "
                           f"be at most {MAX_SEQ_LEN}; got {raw['max_seq_len']!r}")
    try:
        return GlassConfig(**raw)
    except ValueError as exc:
        raise WeightsError("weights.config", f"weights.config: {exc}") from None


def decode_weights(obj: Any, max_parameters: int | None = None) -> GlassLM:
    """Rebuild the model ``encode_weights`` wrote, checking every field.

    Raises:
        WeightsError (a ValueError) naming the field: not the format; a config field that
            is not a positive number, or that GlassConfig refuses; vocab other than 256;
            max_seq_len above ``MAX_SEQ_LEN``; more than
            ``max_parameters`` weights (checked from the config, before allocating); a
            tensor missing, unknown, with a different shape, not base64, of the wrong
            byte length, or not finite.
    """
    if not isinstance(obj, dict) or obj.get("format") != WEIGHTS_FORMAT:
        raise WeightsError("weights", f"weights must be an object with \"format\": "
                                      f"{WEIGHTS_FORMAT!r} (the done event's weights)")
    config = _config(obj.get("config"))
    if max_parameters is not None and count_parameters(config) > max_parameters:
        raise WeightsError("weights.config", f"the model has {count_parameters(config)} "
                           f"parameters; at most {max_parameters} (GLASSLLM_MAX_PARAMETERS)")
    tensors = obj.get("tensors")
    if not isinstance(tensors, dict):
        raise WeightsError("weights.tensors", "weights.tensors must be an object")
    model = GlassLM(config)
    params = dict(model.named_parameters())
    missing, unknown = sorted(params.keys() - tensors.keys()), sorted(tensors.keys() - params)
    if missing or unknown:
        raise WeightsError("weights.tensors", f"weights.tensors: missing {missing}, "
                                              f"unknown {unknown[:5]}")
    for name, p in params.items():
        where = f"weights.tensors.{name}"
        item = tensors[name]
        if not isinstance(item, dict) or item.get("shape") != list(p.data.shape):
            got = item.get("shape") if isinstance(item, dict) else item
            raise WeightsError(where, f"{where} must have shape {list(p.data.shape)}; "
                                      f"got {str(got)[:60]}")
        try:
            raw = base64.b64decode(item.get("data", ""), validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise WeightsError(where, f"{where}.data is not base64") from None
        if len(raw) != p.data.size * 8:
            raise WeightsError(where, f"{where}.data must be {p.data.size * 8} bytes "
                                      f"(float64); got {len(raw)}")
        value = np.frombuffer(raw, dtype="<f8").reshape(p.data.shape).astype(np.float64)
        if not np.all(np.isfinite(value)):
            raise WeightsError(where, f"{where} has non-finite values")
        p.data = value
    return model


# ---------------------------------------------------------------------------------------
# Attention probabilities and their gradients
# ---------------------------------------------------------------------------------------


def attention_maps(model: GlassLM, ids: np.ndarray) -> dict[str, Any]:
    """Every layer's attention probabilities for a prompt, and the loss's gradient on them.

    Runs ``model`` on ids (n,) once, keeping each layer's P = softmax(q·kᵀ/√dk, causal)
    of shape (H, n, n), with the prompt's own next-token loss
    loss = mean over t < n−1 of cross_entropy(logits[t], ids[t+1]); then backward gives
    ∂loss/∂P (H, n, n) per layer, P treated as free numbers (not re-normalised). The
    last row's gradient is zero: position n−1's prediction has no target in the prompt.

    Shapes: ids (n,) with 2 ≤ n ≤ max_seq_len → probs, grads (L, H, n, n) float64.

    Raises:
        ValueError: ids not 1-D, fewer than 2 tokens, or longer than max_seq_len.

    SPEC L3.5 (attention); gradients by the autograd (L0.5).
    """
    ids = id_array(ids, "ids", model.config.vocab)  # no float is truncated into an id
    if ids.ndim != 1:
        raise ValueError(f"ids must be one prompt (n,), got shape {ids.shape}: the maps are"
                         " per prompt, so a batch (B, n) is one call per row")
    if not 2 <= len(ids) <= model.config.max_seq_len:
        raise ValueError(f"the prompt must be 2 to {model.config.max_seq_len} tokens; "
                         f"got {ids.shape}")
    recorded: list[Tensor] = []

    def keep(weights: Tensor) -> Tensor:
        recorded.append(weights.retain_grad())
        return weights

    token = ATTENTION_PROBE.set(keep)
    try:
        loss = next_token_loss(model, ids)
    finally:
        ATTENTION_PROBE.reset(token)
    loss.backward()
    probs = np.stack([w.data[0] for w in recorded])  # (L, H, n, n)
    grads = np.stack([w.grad[0] for w in recorded])  # (L, H, n, n)
    model.zero_grad()
    return {"loss": loss.item(), "probs": probs, "grads": grads}


def next_token_loss(model: GlassLM, ids: np.ndarray) -> Tensor:
    """Mean cross-entropy of predicting ids[t+1] from ids[: t+1], for t < n−1: a scalar."""
    logits = model(ids[None, :])  # (1, n, V)
    return cross_entropy(getitem(logits, (0, slice(0, -1))), ids[1:])
