"""Optimizers and gradient clipping: the update rules, one short ``step`` each.

An optimizer holds a list of parameters (Tensors that require grad) and whatever state
its rule needs (momentum buffers, Adam moments). ``step()`` reads every ``p.grad`` and
writes ``p.data`` in place; parameters whose grad is None are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from glassllm import Tensor

__all__ = ["SGD", "AdamW", "clip_grad_norm"]


class _Optimizer:
    def __init__(self, params: Iterable[Tensor], lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        if lr < 0:
            raise ValueError(f"learning rate must be >= 0, got {lr}")
        self.lr = lr

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None


class SGD(_Optimizer):
    """Stochastic gradient descent with (heavy-ball) momentum.

    buf ← momentum · buf + g  (buf starts at 0, so the first step uses g itself)
    p   ← p − lr · buf
    With weight_decay > 0, g is first replaced by g + weight_decay · p (coupled L2), as
    ``torch.optim.SGD`` does.

    Example:
        >>> p = Tensor([1.0], requires_grad=True); opt = SGD([p], lr=0.1, momentum=0.9)
        >>> p.grad = np.array([1.0]); opt.step(); p.data     # 1 - 0.1·1
        array([0.9])
        >>> p.grad = np.array([1.0]); opt.step(); p.data     # 0.9 - 0.1·(0.9·1 + 1)
        array([0.71])
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 0.01,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
    ):
        super().__init__(params, lr)
        self.momentum, self.weight_decay = momentum, weight_decay
        self.buffers = [np.zeros_like(p.data) for p in self.params]

    def step(self) -> None:
        for p, buf in zip(self.params, self.buffers, strict=True):
            if p.grad is None:
                continue
            g = p.grad + self.weight_decay * p.data if self.weight_decay else p.grad
            buf *= self.momentum
            buf += g
            p.data = p.data - self.lr * buf  # a new array: data is read-only


class AdamW(_Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019).

    t ← t + 1
    p ← p − lr · weight_decay · p          (decay applied to the weights, not the gradient)
    m ← β1 · m + (1 − β1) · g              v ← β2 · v + (1 − β2) · g²
    p ← p − lr · (m / (1 − β1ᵗ)) / (sqrt(v / (1 − β2ᵗ)) + eps)

    This is ``torch.optim.AdamW``'s rule with its default ``amsgrad=False``.

    Example:
        >>> p = Tensor([1.0], requires_grad=True); opt = AdamW([p], lr=0.1, weight_decay=0.0)
        >>> p.grad = np.array([3.0]); opt.step(); p.data.round(6)  # first step moves by ~lr
        array([0.9])

    Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization";
    Kingma & Ba 2015, "Adam".
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, lr)
        self.beta1, self.beta2 = betas
        self.eps, self.weight_decay = eps, weight_decay
        self.t = 0
        self.m = [np.zeros_like(p.data) for p in self.params]
        self.v = [np.zeros_like(p.data) for p in self.params]

    def step(self) -> None:
        self.t += 1
        correction1 = 1.0 - self.beta1**self.t
        correction2 = 1.0 - self.beta2**self.t
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            g = p.grad
            decayed = p.data * (1.0 - self.lr * self.weight_decay)  # decoupled weight decay
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * g * g
            p.data = decayed - self.lr * (m / correction1) / (np.sqrt(v / correction2) + self.eps)


def clip_grad_norm(params: Iterable[Tensor], max_norm: float) -> float:
    """Scale all gradients together so their global L2 norm is at most ``max_norm``.

    norm = sqrt(Σ ‖p.grad‖²) over every parameter; if norm > max_norm, each grad is
    multiplied by max_norm / (norm + 1e-6) (as ``torch.nn.utils.clip_grad_norm_``).
    Returns the norm measured before clipping.

    Example:
        >>> p = Tensor([0.0, 0.0], requires_grad=True); p.grad = np.array([3.0, 4.0])
        >>> clip_grad_norm([p], 1.0), p.grad.round(6)
        (5.0, array([0.6, 0.8]))
    """
    grads = [p.grad for p in params if p.grad is not None]
    norm = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
    if norm > max_norm:
        scale = max_norm / (norm + 1e-6)
        for g in grads:
            g *= scale
    return norm
