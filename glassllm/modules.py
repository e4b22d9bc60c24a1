"""The modules of the layers reference (SPEC L7): objects that own weights and call the
functional forms of ``glassllm.layers``.

``Module`` finds a model's parameters among its attributes; ``Linear``, ``Embedding``,
``RMSNorm``, ``Attention``, ``SwiGLU`` and ``Block`` each hold the weights of one
functional form (``linear`` … ``transformer_block``) and call it; ``GlassLM`` is the tiny
trainable llama-style model: token embedding → blocks → final norm → logits, its loss
and greedy ``generate``, and ``save`` / ``load`` of its weights. Read ``glassllm/layers.py``
first: the math is there, these classes only keep the weights. Every name here is also
importable from ``glassllm.layers``.
"""

from __future__ import annotations

import contextlib
import math
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from glassllm.autograd import cross_entropy, embedding, reshape, softmax_np
from glassllm.errors import check_int, check_real, id_array
from glassllm.grad_mode import no_grad
from glassllm.layers import (
    GlassConfig,
    attention,
    linear,
    rms_norm,
    rope_angles,
    swiglu,
)
from glassllm.shapes import check_heads
from glassllm.tensor import Tensor

__all__ = ["Attention", "Block", "Embedding", "GlassLM", "Linear", "Module", "RMSNorm",
           "SwiGLU"]


def _umask() -> int:
    """The process's umask, read without changing it where Linux tells it."""
    with contextlib.suppress(OSError, ValueError, StopIteration), \
            open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: set and restore
    os.umask(mask)
    return mask


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator:
    """A binary file to write ``path``'s new contents into, created beside it. When the
    block ends, the file is flushed, fsynced and renamed over ``path`` (``os.replace``:
    atomic), then the folder is fsynced; if anything fails first (a full disk, a file-size
    limit, an exception), the new file is removed and ``path`` keeps what it held."""
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part",
                                   dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(partial, 0o666 & ~_umask())  # what open() would give it
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(partial)
        raise
    with contextlib.suppress(OSError):  # the rename itself, on disk (not on every system)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


class Module:
    """Base class: finds parameters (Tensors that require grad) among attributes.

    Attributes that are Tensors with ``requires_grad`` are parameters; attributes that are
    Modules, or lists of Modules, are searched recursively, giving dotted names such as
    ``blocks.0.attn.wq``. A Tensor reachable under two names (tied weights, e.g.
    ``model.blocks[1].attn.wq = model.blocks[0].attn.wq``) is one parameter, listed once
    under the first name found, as in PyTorch: optimizers, clipping, ``state_dict`` and
    ``num_parameters`` all see it once.
    """

    def named_parameters(self, prefix: str = "") -> Iterator[tuple[str, Tensor]]:
        seen: set[int] = set()
        for name, p in self._all_parameters(prefix):
            if id(p) not in seen:
                seen.add(id(p))
                yield name, p

    def _all_parameters(self, prefix: str) -> Iterator[tuple[str, Tensor]]:
        """Every (name, parameter) pair, a tied Tensor once per name (depth first)."""
        for name, value in vars(self).items():
            if isinstance(value, Tensor) and value.requires_grad:
                yield prefix + name, value
            elif isinstance(value, Module):
                yield from value._all_parameters(f"{prefix}{name}.")
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield from item._all_parameters(f"{prefix}{name}.{i}.")

    def parameters(self) -> list[Tensor]:
        return [p for _, p in self.named_parameters()]

    def num_parameters(self) -> int:
        """The number of trainable numbers: a tied Tensor counts once."""
        return sum(p.size for p in self.parameters())

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    def state_dict(self) -> dict[str, np.ndarray]:
        """Copies of every parameter's data, keyed by dotted name (a tied one once)."""
        return {name: p.data.copy() for name, p in self.named_parameters()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        """Copy arrays into the parameters. Raises KeyError/ValueError on any mismatch.

        Nothing changes unless every name and shape matches.
        """
        params = dict(self.named_parameters())
        missing, unexpected = params.keys() - state.keys(), state.keys() - params.keys()
        if missing or unexpected:
            raise KeyError(
                f"state dict mismatch: missing {sorted(missing)}, unexpected {sorted(unexpected)}"
            )
        values = {}
        for name, p in params.items():
            value = np.asarray(state[name])
            if value.dtype.kind not in "fiu":  # bool, complex, str, object: not weights
                raise ValueError(f"{name}: expected real numbers, got dtype {value.dtype}")
            if value.shape != p.data.shape:
                raise ValueError(f"{name}: expected shape {p.data.shape}, got {value.shape}")
            values[name] = value
        for name, p in params.items():
            p.data = values[name]  # copied (as float64) by the setter

    def save(self, path: str | Path) -> None:
        """Write the state dict to an ``.npz`` file (plain arrays, no pickle), at exactly
        ``path``, atomically: written beside it, flushed and renamed over it, so a save
        that fails (a full disk, a file-size limit) leaves the previous file as it was."""
        with _replacing(Path(path)) as f:
            np.savez(f, **self.state_dict())

    def load(self, path: str | Path) -> None:
        """Read an ``.npz`` written by ``save`` (``allow_pickle=False``)."""
        with np.load(path, allow_pickle=False) as archive:
            self.load_state_dict({name: archive[name] for name in archive.files})

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


def _param(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> Tensor:
    return Tensor(rng.normal(0.0, std, size=shape), requires_grad=True)


class Linear(Module):
    """Owns ``weight`` (d_in, d_out), initialised N(0, 1/d_in); calls ``linear``."""

    def __init__(self, d_in: int, d_out: int, rng: np.random.Generator, std: float | None = None):
        self.weight = _param(rng, (d_in, d_out), std if std is not None else d_in**-0.5)

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight)  # (..., d_out)


class Embedding(Module):
    """Owns ``weight`` (V, d); ``forward(ids)`` reads rows (``autograd.embedding``)."""

    def __init__(self, vocab: int, d: int, rng: np.random.Generator):
        self.weight = _param(rng, (vocab, d), 1.0)

    def forward(self, ids: np.ndarray) -> Tensor:
        return embedding(self.weight, ids)  # (B, n, d)


class RMSNorm(Module):
    """Owns the gain ``weight`` (d,), initialised to ones; calls ``rms_norm``."""

    def __init__(self, d: int, eps: float = 1e-6):
        self.eps = eps
        self.weight = Tensor(np.ones(d), requires_grad=True)

    def forward(self, x: Tensor, *, fused: bool = False) -> Tensor:
        return rms_norm(x, self.weight, self.eps, fused=fused)  # (..., d)


class Attention(Module):
    """Owns ``wq wk wv wo``; calls ``attention``. ``wo`` starts smaller (residual scaling)."""

    def __init__(
        self, d: int, n_heads: int, n_kv_heads: int, rng: np.random.Generator, out_std: float
    ):
        check_heads(d, n_heads, n_kv_heads)
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        dk = d // n_heads
        self.wq = _param(rng, (d, n_heads * dk), d**-0.5)
        self.wk = _param(rng, (d, n_kv_heads * dk), d**-0.5)
        self.wv = _param(rng, (d, n_kv_heads * dk), d**-0.5)
        self.wo = _param(rng, (n_heads * dk, d), out_std)

    def forward(self, x: Tensor, cos: np.ndarray, sin: np.ndarray, *, fused: bool = False,
                cache: Any = None) -> Tensor:
        return attention(x, self.wq, self.wk, self.wv, self.wo, self.n_heads, self.n_kv_heads,
                         cos, sin, fused=fused, cache=cache)  # (B, n, d)


class SwiGLU(Module):
    """Owns ``w1`` (gate), ``w3`` (up), ``w2`` (down); calls ``swiglu``."""

    def __init__(self, d: int, hidden: int, rng: np.random.Generator, out_std: float):
        self.w1 = _param(rng, (d, hidden), d**-0.5)
        self.w3 = _param(rng, (d, hidden), d**-0.5)
        self.w2 = _param(rng, (hidden, d), out_std)

    def forward(self, x: Tensor, *, fused: bool = False) -> Tensor:
        return swiglu(x, self.w1, self.w2, self.w3, fused=fused)  # (..., d)


class Block(Module):
    """Pre-norm block; ``forward`` is ``transformer_block`` written with the modules."""

    def __init__(self, config: GlassConfig, rng: np.random.Generator):
        d = config.d_model
        out_std = (d**-0.5) / math.sqrt(2 * config.n_layers)  # GPT-2's residual scaling
        self.attn_norm = RMSNorm(d, config.norm_eps)
        self.attn = Attention(d, config.n_heads, config.n_kv_heads, rng, out_std)
        self.ffn_norm = RMSNorm(d, config.norm_eps)
        self.ffn = SwiGLU(d, config.ffn_hidden, rng, out_std * math.sqrt(d / config.ffn_hidden))

    def forward(self, x: Tensor, cos: np.ndarray, sin: np.ndarray, *, fused: bool = False,
                cache: Any = None) -> Tensor:
        """``fused``: the fused layers (the trainer's choice); ``cache``: this block's
        keys and values so far (generation; ``glassllm.layers.attention``)."""
        h = x + self.attn(self.attn_norm(x, fused=fused), cos, sin, fused=fused,
                          cache=cache)  # (B, n, d): residual 1
        return h + self.ffn(self.ffn_norm(h, fused=fused), fused=fused)  # (B, n, d): residual 2


class GlassLM(Module):
    """A tiny llama-style language model: embedding → blocks → RMSNorm → linear head.

    ``forward(ids)`` gives next-token logits (B, n, V); ``loss(ids, targets)`` their mean
    cross-entropy; ``generate`` samples continuations. Weights are drawn from
    ``np.random.default_rng(config.seed)`` in a fixed order, so a config fixes the model.

    Example:
        >>> config = GlassConfig(d_model=16, n_layers=1, n_heads=2, n_kv_heads=1, ffn_hidden=32)
        >>> model = GlassLM(config)
        >>> model(np.array([[72, 105]])).shape
        (1, 2, 256)
        >>> [name for name, _ in model.named_parameters()][:3]
        ['tok_emb.weight', 'blocks.0.attn_norm.weight', 'blocks.0.attn.wq']
    """

    def __init__(self, config: GlassConfig | None = None):
        self.config = config = config or GlassConfig()
        rng = np.random.default_rng(config.seed)
        self.tok_emb = Embedding(config.vocab, config.d_model, rng)
        self.blocks = [Block(config, rng) for _ in range(config.n_layers)]
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.head = Linear(config.d_model, config.vocab, rng)

    def forward(self, ids: np.ndarray, *, fused: bool = False, cache: Any = None) -> Tensor:
        """Logits (B, n, V) of ids (B, n): integers in [0, V) of any integer dtype.

        ``fused=True`` runs rms_norm, attention and swiglu as fused nodes (the training
        loop's choice: the same math, one node each; ``glassllm.fast.fused``). ``cache`` (a
        ``glassllm.fast.kvcache.KVCache``, generation only): ids continue the positions it
        holds, and their keys and values are added to it.

        Raises TypeError for an id that is not an integer and ValueError for one outside
        [0, V), each naming the first such id; ValueError for a shape that is not
        (B, n) or more than max_seq_len positions (the cached ones included).
        """
        ids = id_array(ids, "ids", self.config.vocab)
        if ids.ndim != 2:
            raise ValueError(f"ids must be (B, n), got shape {ids.shape}")
        t, n = (0 if cache is None else cache.length), ids.shape[-1]  # t positions cached
        if t + n > self.config.max_seq_len:
            raise ValueError(f"sequence length {t + n} exceeds max_seq_len "
                             f"{self.config.max_seq_len}")
        dk = self.config.d_model // self.config.n_heads
        cos, sin = rope_angles(n, dk, self.config.rope_theta, offset=t)  # (n, dk/2) each
        x = self.tok_emb(ids)  # (B, n, d)
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, fused=fused,
                      cache=None if cache is None else cache.layers[i])  # (B, n, d)
        return self.head(self.norm(x, fused=fused))  # (B, n, V)

    def loss(self, ids: np.ndarray, targets: np.ndarray, *, fused: bool = False) -> Tensor:
        """Mean cross-entropy of next-token prediction: ids, targets (B, n) → scalar.

        Both are integer ids in [0, V) of any integer dtype (converted to ``np.intp``);
        TypeError/ValueError name the first bad one, or the shapes when they differ.
        ``fused`` as in ``forward``.
        """
        targets = id_array(targets, "targets", self.config.vocab)
        logits = self.forward(ids, fused=fused)  # (B, n, V)
        B, n, V = logits.shape
        if targets.shape != (B, n):
            raise ValueError(f"targets must have the shape of ids (B, n) = {(B, n)}, "
                             f"got {targets.shape}")
        return cross_entropy(reshape(logits, (B * n, V)), targets.reshape(B * n))

    def generate(
        self,
        ids: np.ndarray,
        max_new_tokens: int,
        temperature: float = 1.0,
        top_k: int | None = None,
        rng: np.random.Generator | None = None,
        kv_cache: bool = True,
    ) -> np.ndarray:
        """Sample ``max_new_tokens`` after a prompt. temperature 0 means greedy.

        Shapes: ids (n,) → (n + max_new_tokens,); a batch of prompts ids (B, n) →
        (B, n + max_new_tokens), as PyTorch's and Hugging Face's ``generate`` take one:
        each row is continued on its own, the rows one after another with the same
        generator (a greedy row is exactly ``generate(ids[b])``; a sampled one draws after
        the rows before it). Ids of any integer dtype; the answer is int64.

        The context is cropped to the last ``max_seq_len`` tokens. With ``kv_cache`` (the
        default) each new token runs only its own position through the model, reading the
        keys and values of the earlier ones from ``glassllm.fast.kvcache.KVCache``; without it,
        every step reruns the forward pass over the whole context (clear, not fast). Both
        give the same tokens (tests/library/test_training.py).

        Raises: ValueError for ids of any other shape (a single id is ``[id]``); TypeError/
        ValueError naming the first id that is not an integer in [0, V);
        ``max_new_tokens`` not an int ≥ 0; ``temperature`` not a finite number ≥ 0;
        ``top_k`` neither None nor an int ≥ 1 (k ≥ V keeps every token).
        """
        max_new_tokens = check_int("max_new_tokens", max_new_tokens, minimum=0)
        temperature = check_real("temperature", temperature, 0.0)
        if top_k is not None:
            top_k = check_int("top_k", top_k, minimum=1)
        rng = rng if rng is not None else np.random.default_rng(0)
        ids = id_array(ids, "ids", self.config.vocab)
        if ids.ndim == 2:  # (B, n): row by row, never one flat sequence
            rows = [self._generate_row(row, max_new_tokens, temperature, top_k, rng, kv_cache)
                    for row in ids]
            return np.array(rows, dtype=np.int64).reshape(  # (B, n + k)
                len(ids), ids.shape[1] + max_new_tokens)
        if ids.ndim != 1:
            raise ValueError(f"ids must be one prompt (n,) or a batch of prompts (B, n), "
                             f"got shape {ids.shape}")
        return self._generate_row(ids, max_new_tokens, temperature, top_k, rng, kv_cache)

    def _generate_row(self, ids: np.ndarray, max_new_tokens: int, temperature: float,
                      top_k: int | None, rng: np.random.Generator,
                      kv_cache: bool) -> np.ndarray:
        """`generate` of one prompt (n,), its arguments checked: (n + max_new_tokens,)."""
        out = ids.tolist()
        if kv_cache:
            from glassllm.fast.kvcache import next_logits_cached

            next_logits = next_logits_cached(self)
        else:
            def next_logits(tokens: list[int]) -> np.ndarray:
                context = np.array([tokens[-self.config.max_seq_len :]])  # (1, n)
                return self.forward(context).data[0, -1]  # (V,)
        with no_grad():
            for _ in range(max_new_tokens):
                logits = next_logits(out)  # (V,)
                if temperature <= 0:
                    out.append(int(np.argmax(logits)))
                    continue
                logits = logits / temperature
                if top_k is not None and top_k < logits.size:
                    kth = np.sort(logits)[-top_k]
                    logits = np.where(logits < kth, -np.inf, logits)
                probs = softmax_np(logits)  # (V,)
                out.append(int(rng.choice(logits.size, p=probs)))
        return np.array(out, dtype=np.int64)

    @staticmethod
    def config_path(path: str | Path) -> Path:
        """Where the config of the checkpoint at ``path`` goes: ``model.npz`` → ``model.json``,
        any other name whole plus ``.json`` (``runs/lr0.003`` → ``runs/lr0.003.json``, not
        ``runs/lr0.json``, which ``runs/lr0.01``'s would overwrite)."""
        path = Path(path)
        return path.with_suffix(".json") if path.suffix == ".npz" else \
            path.with_name(path.name + ".json")

    def save_checkpoint(self, path: str | Path) -> None:
        """Write weights to ``path`` (.npz) and the config beside it (`config_path`).

        Both files are written in full (beside their targets, flushed) before either
        replaces its target, so a save that fails halfway (a full disk, a file-size limit)
        leaves the previous checkpoint loadable, as it was."""
        path = Path(path)
        with _replacing(self.config_path(path)) as config, _replacing(path) as weights:
            np.savez(weights, **self.state_dict())
            config.write(self.config.to_json().encode("utf-8"))

    @classmethod
    def from_checkpoint(cls, path: str | Path) -> GlassLM:
        """Rebuild a model from ``save_checkpoint``'s pair: the .npz at ``path`` and the
        config at `config_path` (read as bytes: UTF-8, a BOM ignored)."""
        path = Path(path)
        model = cls(GlassConfig.from_json(cls.config_path(path).read_bytes()))
        model.load(path)
        return model
