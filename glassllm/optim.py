"""Optimizers and gradient clipping: the update rules, one short ``step`` each.

An optimizer holds a list of parameters (Tensors that require grad) and, like
``torch.optim``, a separate state for each parameter (``state[i]`` for ``params[i]``):
its own step count, momentum buffer or Adam moments. The state of a parameter is made
the first time it has a gradient. ``step()`` reads every ``p.grad`` and writes
``p.data``; a parameter whose grad is None is skipped entirely: no moment update, no
step count, no weight decay (a layer unfrozen late starts its bias correction at 1).

A Tensor listed twice (tied weights: ``model.head.weight`` being ``tok_emb.weight``) is
one parameter: optimizers and ``clip_grad_norm`` keep its first occurrence only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from glassllm.tensor import Tensor

__all__ = ["SGD", "AdamW", "clip_grad_norm", "unique_parameters"]


def unique_parameters(params: Iterable[Tensor]) -> list[Tensor]:
    """``params`` in order with repeats of the same Tensor object dropped (tied weights).

    Identity, not equality: two different Tensors with equal values are two parameters.
    Raises TypeError naming the position of anything that is not a Tensor.

    Example:
        >>> w = Tensor([1.0], requires_grad=True)
        >>> len(unique_parameters([w, w, Tensor([1.0], requires_grad=True)]))
        2
    """
    if isinstance(params, Tensor):
        raise TypeError("params must be an iterable of Tensors, got a single Tensor; wrap it: [p]")
    seen: set[int] = set()
    out = []
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"params[{i}] must be a Tensor, got {type(p).__name__}")
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def _real(
    name: str, value: Any, *, low: float = 0.0, high: float | None = None, open_high: bool = False
) -> float:
    """A hyper-parameter as float: a finite real number in [low, high] (bools refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
        value, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    value = float(value)
    too_high = high is not None and (value >= high if open_high else value > high)
    if not math.isfinite(value) or value < low or too_high:
        bound = "" if high is None else (f" and < {high}" if open_high else f" and <= {high}")
        raise ValueError(f"{name} must be a finite number >= {low}{bound}, got {value}")
    return value


class _Optimizer:
    """Shared parts: the deduplicated parameter list, per-parameter ``state``, and
    ``state_dict`` / ``load_state_dict`` in ``torch.optim``'s layout."""

    #: names of the per-parameter state arrays (each shaped like its parameter) and counts
    _arrays: tuple[str, ...] = ()
    _counts: tuple[str, ...] = ()

    def __init__(self, params: Iterable[Tensor], lr: float):
        self.params = unique_parameters(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        self.lr = _real("lr", lr)
        self.state: dict[int, dict[str, Any]] = {}  # params[i] -> its state, made lazily

    def _hyper(self) -> dict[str, Any]:
        raise NotImplementedError

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {i: {...}}, "param_groups": [{hyper-parameters, "params": [0..P-1]}]}``.

        Arrays are copies; a parameter that never had a gradient has no entry. This is
        ``torch.optim.Optimizer.state_dict``'s layout, with one parameter group.
        """
        state = {
            i: {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in s.items()}
            for i, s in self.state.items()
        }
        group = {**self._hyper(), "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned, for the same parameters in the same order.

        Keys of ``state`` may be ints or their decimal strings (a JSON round trip). Raises
        ValueError naming the mismatch (parameter count, a parameter index, the array and
        both shapes) and changes nothing when any check fails.
        """
        groups = state_dict.get("param_groups")
        if not isinstance(groups, list) or len(groups) != 1 or "params" not in groups[0]:
            raise ValueError("state_dict must have one param group with a 'params' list")
        count = len(groups[0]["params"])
        if count != len(self.params):
            raise ValueError(
                f"state_dict holds {count} parameters, this optimizer has {len(self.params)}"
            )
        hyper = {k: v for k, v in groups[0].items() if k != "params"}
        unknown = sorted(hyper.keys() - self._hyper().keys())
        if unknown:
            raise ValueError(f"state_dict param group has unknown settings {unknown}")
        fresh = type(self)(self.params, **hyper)  # validates every setting, changes nothing
        for key, entry in state_dict.get("state", {}).items():
            i = _param_index(key, len(self.params))
            missing = {*fresh._counts, *fresh._arrays} - entry.keys()
            if missing:
                raise ValueError(f"state_dict state[{i}] lacks {sorted(missing)}")
            for name in fresh._counts:
                value = entry[name]
                if (
                    isinstance(value, (bool, np.bool_))
                    or not isinstance(value, (int, np.integer))
                    or value < 1
                ):
                    raise ValueError(
                        f"state_dict state[{i}]['{name}'] must be an integer >= 1, got {value!r}"
                    )
                fresh.state.setdefault(i, {})[name] = int(value)
            for name in fresh._arrays:
                arr = np.array(entry[name], dtype=np.float64)  # a copy
                if arr.shape != self.params[i].shape:
                    raise ValueError(
                        f"state_dict state[{i}]['{name}'] has shape {arr.shape}, parameter "
                        f"{i} has shape {self.params[i].shape}"
                    )
                fresh.state.setdefault(i, {})[name] = arr
        vars(self).update(vars(fresh))


def _param_index(key: Any, count: int) -> int:
    """A ``state`` key (an int, or its decimal string after JSON) as a parameter index."""
    if isinstance(key, str) and key.isdecimal():
        key = int(key)
    if (
        isinstance(key, (bool, np.bool_))
        or not isinstance(key, (int, np.integer))
        or not 0 <= key < count
    ):
        raise ValueError(f"state_dict state key {key!r} is not a parameter index 0..{count - 1}")
    return int(key)


class SGD(_Optimizer):
    """Stochastic gradient descent with (heavy-ball) momentum, as ``torch.optim.SGD``.

    g ← g + weight_decay · p                         (coupled L2, when weight_decay > 0)
    buf ← g on a parameter's first step, then buf ← momentum · buf + (1 − dampening) · g
    p ← p − lr · buf      (nesterov: p ← p − lr · (g + momentum · buf))

    With momentum 0 there is no buffer and the step is p ← p − lr · g. Each parameter
    has its own buffer, made at its first gradient; a parameter with grad None is left
    alone (no decay, no buffer change).

    Raises: TypeError/ValueError for a setting that is not a finite number in range
    (lr, momentum, dampening, weight_decay ≥ 0), nesterov without momentum or with
    dampening (as PyTorch).

    Example:
        >>> p = Tensor([1.0], requires_grad=True); opt = SGD([p], lr=0.1, momentum=0.9)
        >>> p.grad = np.array([1.0]); opt.step(); p.data     # 1 - 0.1·1
        array([0.9])
        >>> p.grad = np.array([1.0]); opt.step(); p.data     # 0.9 - 0.1·(0.9·1 + 1)
        array([0.71])
    """

    _arrays = ("momentum_buffer",)

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 0.01,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        super().__init__(params, lr)
        self.momentum = _real("momentum", momentum)
        self.dampening = _real("dampening", dampening)
        self.weight_decay = _real("weight_decay", weight_decay)
        if not isinstance(nesterov, (bool, np.bool_)):
            raise TypeError(f"nesterov must be True or False, got {nesterov!r}")
        if nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("nesterov momentum requires momentum > 0 and dampening 0")
        self.nesterov = bool(nesterov)
        if self.momentum == 0:
            self._arrays = ()

    def _hyper(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "momentum": self.momentum,
            "dampening": self.dampening,
            "weight_decay": self.weight_decay,
            "nesterov": self.nesterov,
        }

    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad + self.weight_decay * p.data if self.weight_decay else p.grad
            if self.momentum:
                buf = self.state.get(i, {}).get("momentum_buffer")
                if buf is None:  # first step: the buffer is g itself, no dampening
                    buf = np.array(g, dtype=np.float64)
                    self.state[i] = {"momentum_buffer": buf}
                else:
                    buf *= self.momentum
                    buf += (1.0 - self.dampening) * g
                g = g + self.momentum * buf if self.nesterov else buf
            # a new array (data is read-only); np.asarray keeps a 0-d parameter an array
            # (NumPy answers p − lr·g on 0-d arrays with a scalar)
            p._take_data(np.asarray(p.data - self.lr * g, dtype=np.float64))


# The folded update divides by step_size: safe while sqrt(v) / step_size stays finite
# (sqrt(v) <= 1.4e154 for any finite v), so below this the update keeps PyTorch's order.
_FOLDABLE = 1e-100


class AdamW(_Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter 2019), as ``torch.optim.AdamW``.

    For each parameter with a gradient, with its own step count t:
    t ← t + 1
    p ← p − lr · weight_decay · p          (decay applied to the weights, not the gradient)
    m ← β1 · m + (1 − β1) · g              v ← β2 · v + (1 − β2) · g²
    p ← p − (lr / (1 − β1ᵗ)) · m / (sqrt(v) / sqrt(1 − β2ᵗ) + eps)

    m, v start at 0 on the parameter's first gradient; a parameter whose grad is None is
    skipped entirely (no t, no m/v update, no decay), as PyTorch does. ``amsgrad=False``.

    Raises: TypeError/ValueError for lr, eps, weight_decay not finite ≥ 0, or a beta
    outside [0, 1).

    Example:
        >>> p = Tensor([1.0], requires_grad=True); opt = AdamW([p], lr=0.1, weight_decay=0.0)
        >>> p.grad = np.array([3.0]); opt.step(); p.data.round(6)  # first step moves by ~lr
        array([0.9])

    Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization";
    Kingma & Ba 2015, "Adam".
    """

    _arrays = ("exp_avg", "exp_avg_sq")
    _counts = ("step",)

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        self.beta1 = _real("betas[0]", betas[0], high=1.0, open_high=True)
        self.beta2 = _real("betas[1]", betas[1], high=1.0, open_high=True)
        self.eps = _real("eps", eps)
        self.weight_decay = _real("weight_decay", weight_decay)

    def _hyper(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "betas": (self.beta1, self.beta2),
            "eps": self.eps,
            "weight_decay": self.weight_decay,
        }

    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            state = self.state.get(i)
            if state is None:
                zeros = np.zeros_like(p.data)
                state = self.state[i] = {"step": 0, "exp_avg": zeros, "exp_avg_sq": zeros.copy()}
            state["step"] += 1
            t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
            # Every array is made with the parameter's shape and written with out=: on 0-d
            # arrays NumPy's operators answer scalars, which have no buffer to write into.
            decayed = np.multiply(p.data, 1.0 - self.lr * self.weight_decay,
                                  out=np.empty(p.data.shape))  # decoupled weight decay
            # the formulas above, in place on one scratch array
            scratch = np.multiply(g, 1.0 - self.beta1, out=np.empty(p.data.shape))  # (1 − β1)·g
            m *= self.beta1
            m += scratch
            np.multiply(g, 1.0 - self.beta2, out=scratch)
            scratch *= g  # (1 − β2)·g·g
            v *= self.beta2
            v += scratch
            step_size = self.lr / (1.0 - self.beta1**t)
            root_bc2 = math.sqrt(1.0 - self.beta2**t)
            denom = np.sqrt(v, out=scratch)
            if step_size >= _FOLDABLE:
                # step_size · m / denom as m / (denom / step_size): one pass fewer
                denom *= 1.0 / (root_bc2 * step_size)  # a product
                denom += self.eps / step_size
                np.subtract(decayed, np.divide(m, denom, out=denom), out=decayed)
            elif step_size > 0:  # (lr = 0: no step)
                # a tiny step size: 1 / step_size could overflow to inf (and 0 · inf = NaN
                # where v = 0), so PyTorch's order: sqrt(v) / √(1 − β2ᵗ) + eps, then m / it
                denom /= root_bc2
                denom += self.eps
                np.divide(m, denom, out=denom)
                denom *= step_size
                np.subtract(decayed, denom, out=decayed)
            p._take_data(decayed)  # a new array only p holds: no copy (data is read-only)


def clip_grad_norm(
    params: Iterable[Tensor], max_norm: float, error_if_nonfinite: bool = False
) -> float:
    """Scale all gradients together so their global L2 norm is at most ``max_norm``.

    norm = sqrt(Σ ‖p.grad‖²) over every distinct parameter with a gradient (a tied
    Tensor listed twice counts once); coef = min(max_norm / (norm + 1e-6), 1) and every
    grad is multiplied by coef, as ``torch.nn.utils.clip_grad_norm_``. Returns the norm
    measured before clipping.

    A NaN or infinite gradient makes the norm non-finite. Like PyTorch, the grads are
    then still multiplied by the coefficient (0 for an infinite norm, NaN for a NaN
    norm), so every gradient becomes 0 or NaN and the non-finite norm is returned for
    the caller to see; with ``error_if_nonfinite=True`` a RuntimeError is raised
    instead, before any gradient is changed.

    Raises: TypeError/ValueError if max_norm is not a finite number ≥ 0; RuntimeError
    as above.

    Example:
        >>> p = Tensor([0.0, 0.0], requires_grad=True); p.grad = np.array([3.0, 4.0])
        >>> clip_grad_norm([p], 1.0), p.grad.round(6)
        (5.0, array([0.6, 0.8]))
    """
    max_norm = _real("max_norm", max_norm)
    params = unique_parameters(params)
    grads = [p.grad for p in params if p.grad is not None]
    with np.errstate(over="ignore", invalid="ignore"):
        norm = float(np.sqrt(sum(float(np.sum(g * g)) for g in grads)))
    if not math.isfinite(norm) and error_if_nonfinite:
        raise RuntimeError(
            f"the total norm of the gradients is {norm} (a gradient holds nan or inf), so "
            "they cannot be clipped; pass error_if_nonfinite=False to clip anyway"
        )
    coef = float(np.minimum(max_norm / (norm + 1e-6), 1.0))  # NaN stays NaN
    if coef != 1.0:
        with np.errstate(invalid="ignore"):  # inf · 0 = nan, as in PyTorch
            for p in params:
                if p.grad is not None:
                    p.grad = p.grad * coef  # the setter makes it an array, 0-d included
    return norm
