"""Grad mode: whether ops build the graph, one flag per thread / async task (L0.3, H6).

`no_grad` switches graph building off for the current thread or async task only: it is
backed by a `contextvars.ContextVar`, so concurrent requests in the service never see each
other's grad mode. It works as a context manager and as a decorator, also of generators and
async generators (each step runs under no_grad, the caller's mode in between).

Clauses: L0.3 of docs/ (the contract), H6.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["is_grad_enabled", "no_grad"]

# ----------------------------------------------------------------------------
# Grad mode: one flag per thread / async task (contextvars), never a global.
# ----------------------------------------------------------------------------
_GRAD_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "glassllm_grad_enabled", default=True
)
# The modes that open no_grad blocks will restore, innermost last; per context too, so one
# no_grad object shared by several threads or tasks never mixes up their states.
_SAVED_MODES: contextvars.ContextVar[tuple[bool, ...]] = contextvars.ContextVar(
    "glassllm_saved_grad_modes", default=()
)


def is_grad_enabled() -> bool:
    """True unless a `no_grad` block is active in this thread / task."""
    return _GRAD_ENABLED.get()


class no_grad:
    """Disable graph building: results of ops made inside are constants.

    Usable as a context manager (``with no_grad(): ...``) and as a decorator
    (``@no_grad`` or ``@no_grad()``) of plain functions, generator functions (each
    step of the generator runs without grad; the caller's code between steps keeps its
    own mode), ``async def`` functions and async generators. The flag lives in a
    `contextvars.ContextVar`, so it is isolated per thread and per asyncio task (H6);
    nesting is fine, and so is one no_grad object shared by many threads or tasks.

    Example:
        >>> from glassllm import Tensor, no_grad
        >>> x = Tensor([1.0, 2.0], requires_grad=True)
        >>> with no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def __new__(cls, func: Callable | None = None) -> Any:
        self = super().__new__(cls)
        if func is None:
            return self
        if not callable(func):
            raise TypeError("no_grad takes no arguments: use `with no_grad():` or @no_grad")
        return self(func)  # bare @no_grad: the decorated function itself

    def __enter__(self) -> no_grad:
        _SAVED_MODES.set((*_SAVED_MODES.get(), _GRAD_ENABLED.get()))
        _GRAD_ENABLED.set(False)
        return self

    def __exit__(self, *exc: object) -> None:
        saved = _SAVED_MODES.get()
        _GRAD_ENABLED.set(saved[-1])
        _SAVED_MODES.set(saved[:-1])

    def __call__(self, func: Callable) -> Callable:
        """Decorate `func`; every call gets a fresh context (recursion and threads are safe)."""
        if inspect.isgeneratorfunction(func):
            return _no_grad_generator(func)
        if inspect.isasyncgenfunction(func):
            return _no_grad_async_generator(func)
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with no_grad():
                    return await func(*args, **kwargs)

            return run_async

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with no_grad():
                return func(*args, **kwargs)

        return run


def _no_grad_generator(func: Callable) -> Callable:
    """Run each step of the generator under no_grad, and the caller's code outside it.

    A plain `with` around `yield` would leave grad mode off in the caller while the
    generator is suspended (the context variable lives in the caller's context).
    """

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        gen = func(*args, **kwargs)
        try:
            with no_grad():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with no_grad():
                        gen.close()
                    raise
                except BaseException as exc:  # thrown in by the caller: pass it on
                    with no_grad():
                        response = gen.throw(exc)
                else:
                    with no_grad():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return run


def _no_grad_async_generator(func: Callable) -> Callable:
    """`_no_grad_generator` for `async def ... yield`: each step awaited under no_grad."""

    @functools.wraps(func)
    async def run(*args: Any, **kwargs: Any) -> Any:
        agen = func(*args, **kwargs)
        try:
            with no_grad():
                response = await agen.asend(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with no_grad():
                        await agen.aclose()
                    raise
                except BaseException as exc:  # thrown in by the caller: pass it on
                    with no_grad():
                        response = await agen.athrow(exc)
                else:
                    with no_grad():
                        response = await agen.asend(request)
        except StopAsyncIteration:
            return

    return run
