"""A Python client for the gradient sandbox: numpy in, numpy out, exactly.

    >>> from glassllm.apps.client import Sandbox
    >>> with Sandbox("http://127.0.0.1:8000") as sb:             # doctest: +SKIP
    ...     r = sb.op("mul", {"a": [1.0, 2.0], "b": [3.0, 4.0]})
    ...     r.value, r.grads["a"]
    (array([3., 8.]), array([3., 4.]))

What it does for you:

- **Exact arrays both ways.** NumPy arrays of at least `BASE64_MIN_ELEMENTS` elements
  travel as ``{"dtype", "shape", "base64"}`` (little-endian bytes), smaller ones as JSON
  with the non-finite tokens ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; every answer is
  decoded to float64 arrays. NaN, ±Infinity, -0.0, subnormals and the largest finite float
  come back bit for bit (SPEC H3).
- **Typed errors.** Every failure is a `SandboxError` naming the URL it tried (``url``).
  An error body (H4) becomes a subclass chosen by its status (`InvalidInputError` for 422,
  `TooLargeError` for 413, ...) with ``status``, ``code``, ``input``, ``op`` and
  ``message``; a status without its own class falls back to its family (`ClientError` for
  4xx, `ServerError` for 5xx). No answer at all is a `NoAnswerError` (`UnreachableError`:
  nothing listens there, with how to start a sandbox; `TimedOutError`); an answer that is
  not the sandbox's (a proxy's HTML page with 200) a `BadAnswerError`; a URL that is not
  http(s) an `InvalidURLError`, raised by the constructor, and so is a call's URL that
  httpx refuses to send (an id tens of thousands of characters long).
- **Wrong arguments found here.** A wrong type of argument is a TypeError naming it
  (``dead must be True or False``), a value JSON cannot carry names where it is
  (``variables['x']``), an empty id a ValueError: all before any request.
- **Retries on 503 only.** The sandbox answers 503 when its compute slots are busy (H5),
  with a ``Retry-After`` in seconds or as an HTTP date. The client waits that long plus a
  little random jitter, at most `retries` times and `retry_time` seconds in all. Every
  sandbox call is free of side effects (it computes and forgets), so repeating one is safe.
- **One connection pool** per `Sandbox` (httpx keeps connections alive); use it as a
  context manager, or call `close()`.

Needs only NumPy and httpx (``pip install 'glassllm[client]'``); it never imports the
service or FastAPI, so a notebook or an autograder can use it on its own. The server's URL
is the first argument, else the ``GLASSLLM_URL`` environment variable, else
``http://127.0.0.1:8000`` (what ``make run`` starts).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

try:
    import httpx
except ImportError:                                     # pragma: no cover - tested by name
    raise ImportError("glassllm.apps.client needs httpx; install the client extra:"
                      " pip install 'glassllm[client]'") from None

from glassllm.apps.client_errors import (
    BY_STATUS,
    BadAnswerError,
    BadRequestError,
    BusyError,
    ClientError,
    InvalidInputError,
    InvalidURLError,
    NoAnswerError,
    NotFoundError,
    SandboxError,
    ServerError,
    TimedOutError,
    TooLargeError,
    UnreachableError,
    UnsupportedMediaTypeError,
    asked,
    error_from,
    no_answer,
)
from glassllm.apps.client_types import (
    BASE64_MIN_ELEMENTS,
    CheckReport,
    Result,
    TorchCalls,
    client_repr,
    from_wire,
    path_segment,
    to_wire,
    typed,
)
from glassllm.apps.exercise_client import AsyncExerciseCalls, Exercise, ExerciseCalls, Submitted
from glassllm.apps.mystery_client import AsyncMysteryCalls, Mystery, MysteryCalls, MysteryGrade
from glassllm.sandbox.wire import is_base64

try:                    # faster JSON when present (the service extra has it); never required
    import orjson

    def _dumps(body: Any) -> bytes:
        return orjson.dumps(body)

    def _loads(data: bytes) -> Any:
        return orjson.loads(data)
except ImportError:     # pragma: no cover - the client extra alone
    def _dumps(body: Any) -> bytes:
        return json.dumps(body, allow_nan=False, separators=(",", ":")).encode()

    def _loads(data: bytes) -> Any:
        return json.loads(data)

__all__ = [  # constants, classes, functions (ruff RUF022): defined here or given
    "BASE64_MIN_ELEMENTS",
    "DEFAULT_URL",
    "AsyncSandbox",
    "BadAnswerError",
    "BadRequestError",
    "BusyError",
    "ClientError",
    "Exercise",
    "InvalidInputError",
    "InvalidURLError",
    "Mystery",
    "MysteryGrade",
    "NoAnswerError",
    "NotFoundError",
    "Result",
    "Sandbox",
    "SandboxError",
    "ServerError",
    "Submitted",
    "TimedOutError",
    "TooLargeError",
    "UnreachableError",
    "UnsupportedMediaTypeError",
    "from_wire",
    "to_wire",
]

DEFAULT_URL = "http://127.0.0.1:8000"
"""The sandbox when neither a URL nor ``GLASSLLM_URL`` is given: where ``make run`` serves."""
# --------------------------------------------------------------------------------------
# requests (shared by Sandbox and AsyncSandbox)
# --------------------------------------------------------------------------------------

def _has_base64(obj: Any) -> bool:
    if isinstance(obj, dict):
        return is_base64(obj) or any(_has_base64(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_base64(v) for v in obj)
    return False


def _encoding(body: dict, encoding: str | None) -> dict:
    """Ask for binary answers when asked to, or (``None``) when the request sent any."""
    if encoding is None:
        encoding = "base64" if _has_base64(body) else "json"
    if encoding == "base64":
        body["encoding"] = "base64"
    elif encoding != "json":
        raise ValueError("encoding must be 'json', 'base64' or None (automatic)")
    return body


@typed
def _op_body(inputs: Mapping[str, Any], requires_grad: Sequence[str] | None = None,
            grad_output: Any = None, base64_min: int = BASE64_MIN_ELEMENTS) -> dict:
    body: dict = {"inputs": to_wire(dict(inputs), base64_min, "inputs")}
    if requires_grad is not None:
        body["requires_grad"] = to_wire(list(requires_grad), base64_min, "requires_grad")
    if grad_output is not None:
        body["grad_output"] = to_wire(grad_output, base64_min, "grad_output")
    return body


@typed
def _eval_body(expression: str, variables: Mapping[str, Any] | None = None,
              grad_output: Any = None, check: bool | Mapping[str, Any] = False,
              base64_min: int = BASE64_MIN_ELEMENTS, paths: bool = False,
              dead: bool = False) -> dict:
    body: dict = {"expression": expression}
    if variables:
        body["variables"] = to_wire(dict(variables), base64_min, "variables")
    if grad_output is not None:
        body["grad_output"] = to_wire(grad_output, base64_min, "grad_output")
    if check:
        body["check"] = (to_wire(dict(check), base64_min, "check") if isinstance(check, Mapping)
                         else True)
    body.update({k: True for k, on in (("paths", paths), ("dead", dead)) if on})
    return body


@typed
def _check_body(*, op: str | None, inputs: Mapping[str, Any] | None, expression: str | None,
               variables: Mapping[str, Any] | None, requires_grad: Sequence[str] | None,
               grad_output: Any, value: Any, grads: Mapping[str, Any] | None,
               rtol: float | None, atol: float | None, reveal: bool,
               base64_min: int, digits: int | None = None) -> dict:
    if (op is None) == (expression is None):
        raise ValueError("check needs exactly one of op= (with inputs=) or expression=")
    if op is not None:
        body = {"op": op, **_op_body(inputs or {}, requires_grad, grad_output, base64_min)}
    else:
        body = _eval_body(expression, variables, grad_output, base64_min=base64_min)
    claimed: dict = {}
    if value is not None:
        claimed["value"] = to_wire(value, base64_min, "value")
    if grads:
        claimed["grads"] = to_wire(dict(grads), base64_min, "grads")
    body["claimed"] = claimed
    for name, number in (("rtol", rtol), ("atol", atol), ("digits", digits)):
        if number is not None:
            body[name] = to_wire(number, base64_min, name)
    body["reveal"] = reveal
    return body


@typed
def _case(case: Mapping[str, Any], base64_min: int, index: int = 0) -> dict:
    return to_wire(dict(case), base64_min, f"cases[{index}]")


def _op_path(name: str) -> str:
    """``/api/v1/ops/{name}`` with the name as one quoted path segment: ``"../eval"`` or
    ``"softmax?x=1"`` must reach the sandbox as an op name (its 404 unknown_op), never as
    another route or a query; ``"."`` and ``".."`` (dot segments a URL resolver removes)
    with their dots percent-encoded; ``""`` (the list route) refused (`path_segment`)."""
    return f"/api/v1/ops/{path_segment('name', name)}"


def _retry_delay(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before retrying a 503: its ``Retry-After`` (delta-seconds or an HTTP
    date, RFC 9110 §10.2.3), else 0.5 · 2**attempt, plus up to 10 % random jitter so many
    clients refused together do not come back together."""
    header = response.headers.get("retry-after", "").strip()
    delay = None
    if header.isdigit():
        delay = float(header)
    elif header:
        try:
            when = email.utils.parsedate_to_datetime(header)
            delay = max(0.0, when.timestamp() - time.time())
        except (TypeError, ValueError, IndexError, OverflowError):
            delay = None
    if delay is None:
        delay = 0.5 * 2 ** attempt
    return delay + random.uniform(0.0, 0.1 * delay + 0.05)


def _checked_url(url: str) -> str:
    """``url`` without a trailing slash; InvalidURLError unless it is http(s) with a host."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise InvalidURLError(None, "invalid_url", f"{str(url)[:200]!r} is not a URL ({exc})",
                              url=str(url)[:200]) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidURLError(None, "invalid_url",
                              f"{url[:200]!r} is not an http:// or https:// URL with a host,"
                              " e.g. http://127.0.0.1:8000", url=url[:200])
    return url.rstrip("/")


class _Base:
    def __init__(self, url: str | None, token: str | None, timeout: float, retries: int,
                 retry_time: float, base64_min: int):
        if url:
            hint = "is a sandbox running there, and is the URL right?"
        elif os.environ.get("GLASSLLM_URL"):
            url = os.environ["GLASSLLM_URL"]
            hint = "is a sandbox running there? (the URL is $GLASSLLM_URL's)"
        else:
            url = DEFAULT_URL
            hint = ("no URL was given and GLASSLLM_URL is not set, so this is the default."
                    " Start a sandbox here with `make run` in a glassllm checkout, or"
                    " `pip install 'glassllm[service]'` and `glassllm-sandbox`; or pass the URL"
                    " of a running one: Sandbox('http://host:port'), or set GLASSLLM_URL")
        self.url = _checked_url(url)
        self._hint = hint
        self.retries, self.retry_time, self.base64_min = retries, retry_time, base64_min
        self.headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    __repr__ = client_repr                   # Sandbox('http://…', token=…): never the token

    @staticmethod
    def _content(body: Any) -> bytes:
        return _dumps(body)

    def _should_retry(self, response: httpx.Response, attempt: int, start: float) -> float | None:
        if response.status_code != 503 or attempt >= self.retries:
            return None
        delay = _retry_delay(response, attempt)
        if time.monotonic() - start + delay > self.retry_time:
            return None
        return delay

    def _no_answer(self, exc: httpx.HTTPError, method: str, path: str) -> NoAnswerError:
        return no_answer(exc, f"{method} {self.url}{path}", self._hint)

    def _unsendable(self, exc: httpx.InvalidURL, method: str, path: str) -> InvalidURLError:
        """httpx refused to build the call's URL (``URL too long``: an id, op name or
        student id of tens of thousands of characters); nothing was sent. Not an
        ``httpx.HTTPError``, so ``_send`` turns it into the client's own error here."""
        return InvalidURLError(None, "invalid_url",
                               f"this call's URL cannot be sent ({exc}, {len(path)} characters"
                               f" of path): is an id, op name or student id that long?",
                               url=f"{method} {self.url}{path[:200]}")

    @staticmethod
    def _answer(response: httpx.Response, decode: Any) -> Any:
        """The decoded answer; an error answer raised as its `SandboxError`, an answer that
        is not the sandbox's as `BadAnswerError`."""
        if response.status_code >= 400:
            raise error_from(response)
        try:
            answer = _loads(response.content)
        except ValueError:
            raise BadAnswerError(response.status_code, "bad_answer",
                                 "the answer is not JSON (a proxy in front of the sandbox?): "
                                 + (response.text[:200] or "(empty)"),
                                 url=asked(response)) from None
        try:
            return answer if decode is None else decode(answer)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise BadAnswerError(response.status_code, "bad_answer",
                                 f"the answer is not what this endpoint answers"
                                 f" ({type(exc).__name__}: {str(exc)[:120]})",
                                 url=asked(response)) from exc

    def _batch_results(self, answer: dict) -> list[Result | SandboxError]:
        out: list[Result | SandboxError] = []
        for i, item in enumerate(answer["results"]):
            if "error" in item:
                err = item["error"]
                status = int(err.get("status", 0))
                cls = BY_STATUS.get(status) or (ClientError if status < 500 else ServerError)
                out.append(cls(status, err.get("code", ""), err.get("message", ""),
                               input=err.get("input"), op=err.get("op"), body=err,
                               url=f"POST {self.url}/api/v1/batch, cases[{i}]"))
            else:
                out.append(Result.from_answer(item))
        return out

    _check_report = staticmethod(CheckReport.from_answer)   # masks as NumPy bool arrays

    def _eval_request(self, expression: str, variables: Mapping[str, Any] | None,
                      grad_output: Any, check: bool | Mapping[str, Any], paths: bool,
                      dead: bool, encoding: str | None) -> dict:
        """`eval`'s body; the mystery calls send the same one to their own route."""
        return _encoding(_eval_body(expression, variables, grad_output, check,
                                    self.base64_min, paths, dead), encoding)

    _encoded = staticmethod(_encoding)    # the mystery calls ask for it once the case is in


class Sandbox(ExerciseCalls, MysteryCalls, TorchCalls, _Base):
    """A blocking client; one httpx connection pool. Methods raise `SandboxError`s.

    Args:
        url: the sandbox, e.g. ``"http://127.0.0.1:8000"``; default ``$GLASSLLM_URL``.
        token: sent as ``Authorization: Bearer <token>`` (for a proxy in front).
        timeout: seconds per HTTP request.
        retries: how many times a 503 is retried; retry_time: at most this many seconds of
            waiting in all.
        base64_min: arrays with at least this many elements travel as base64.
        transport: an httpx transport (tests pass `httpx.MockTransport`).
    """

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0,
                 *, retries: int = 3, retry_time: float = 30.0,
                 base64_min: int = BASE64_MIN_ELEMENTS,
                 transport: httpx.BaseTransport | None = None):
        super().__init__(url, token, timeout, retries, retry_time, base64_min)
        self._http = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout,
                                  transport=transport)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, method: str, path: str, body: Any = None, decode: Any = None) -> Any:
        """The answer to ``method path``, decoded by ``decode``; every failure a
        `SandboxError` naming the URL."""
        content = None if body is None else self._content(body)
        start, attempt = time.monotonic(), 0
        while True:
            try:
                response = self._http.request(method, path, content=content)
            except httpx.InvalidURL as exc:
                raise self._unsendable(exc, method, path) from None
            except httpx.HTTPError as exc:
                raise self._no_answer(exc, method, path) from exc
            delay = self._should_retry(response, attempt, start)
            if delay is None:
                return self._answer(response, decode)
            time.sleep(delay)
            attempt += 1

    def op(self, name: str, inputs: Mapping[str, Any], requires_grad: Sequence[str] | None = None,
           grad_output: Any = None, *, encoding: str | None = None) -> Result:
        """Run one registry op forward and backward (``POST /api/v1/ops/{name}``, H2).

        `inputs`: input name → value (NumPy arrays, lists, numbers, index objects).
        `requires_grad`: inputs to differentiate (default: every differentiable one).
        `grad_output`: the backward's seed, shaped like the output (default: ones).
        `encoding`: the answer's arrays, ``"json"`` or ``"base64"``; default: base64 when
        the request sent a binary array. Either way the result is exact.
        """
        body = _encoding(_op_body(inputs, requires_grad, grad_output, self.base64_min), encoding)
        return self._send("POST", _op_path(name), body, Result.from_answer)

    def eval(self, expression: str, variables: Mapping[str, Any] | None = None,
             grad_output: Any = None, check: bool | Mapping[str, Any] = False, *,
             encoding: str | None = None, paths: bool = False, dead: bool = False) -> Result:
        """Evaluate an expression of registry ops (``POST /api/v1/eval``): ``value``,
        ``grads`` per variable, and in ``raw`` every node's value and adjoint.

        `check`: True for finite differences per variable, or the modes, e.g.
        ``{"modes": ["taylor", "adjoint", "eps_sweep"], "float32": True}`` (``raw["check"]``).
        `paths`: also split each shared node's gradient by path (`Result.paths`); `dead`:
        list each variable whose gradient is missing or dead, and why (`Result.dead`)."""
        body = self._eval_request(expression, variables, grad_output, check, paths, dead,
                                  encoding)
        return self._send("POST", "/api/v1/eval", body, Result.from_answer)

    def ops(self) -> list[dict]:
        """Every op of the registry with its inputs and examples (``GET /api/v1/ops``)."""
        return self._send("GET", "/api/v1/ops", decode=lambda a: a["ops"])

    def examples(self) -> list[dict]:
        """SPEC Part L's examples as ready expression requests (``GET /api/v1/examples``)."""
        return self._send("GET", "/api/v1/examples", decode=lambda a: a["examples"])

    def check(self, op: str | None = None, inputs: Mapping[str, Any] | None = None, *,
              expression: str | None = None, variables: Mapping[str, Any] | None = None,
              requires_grad: Sequence[str] | None = None, grad_output: Any = None,
              value: Any = None, grads: Mapping[str, Any] | None = None,
              rtol: float | None = None, atol: float | None = None,
              reveal: bool = True, digits: int | None = None) -> dict:
        """Grade a claimed value and gradients (``POST /api/v1/check``); `digits`: to that
        many significant digits instead of rtol / atol (each report then has ``digits``
        per element and the ``pattern`` of a mistake).

        Returns ``{"passed", "value": report, "grads": {name: report}, "warnings"}``, each
        report with ``shape_match``, ``allclose``, ``mismatches``, ``mask`` (a NumPy bool
        array, True where wrong), ``first_mismatch`` and, unless ``reveal=False``,
        ``max_abs_err``, ``max_rel_err`` and the expected number at the first mismatch.
        """
        body = _check_body(op=op, inputs=inputs, expression=expression, variables=variables,
                          requires_grad=requires_grad, grad_output=grad_output, value=value,
                          grads=grads, rtol=rtol, atol=atol, reveal=reveal,
                          base64_min=self.base64_min, digits=digits)
        return self._send("POST", "/api/v1/check", body, self._check_report)

    def batch(self, cases: Sequence[Mapping[str, Any]], *,
              encoding: str | None = None) -> list[Result | SandboxError]:
        """Several op calls / expressions in one request (``POST /api/v1/batch``).

        Each case is ``{"op": name, "inputs": ..., "requires_grad": ..., "grad_output": ...}``
        or ``{"expression": ..., "variables": ..., "grad_output": ...}``. Answers come in
        order: a `Result`, or the case's own `SandboxError` (returned, not raised). A
        refusal of the whole batch (413 over its work bound) is raised.
        """
        body = _encoding({"cases": [_case(c, self.base64_min, i)
                                    for i, c in enumerate(cases)]}, encoding)
        return self._send("POST", "/api/v1/batch", body, self._batch_results)


class AsyncSandbox(AsyncExerciseCalls, AsyncMysteryCalls, _Base):
    """The same client for asyncio (``async with AsyncSandbox(url) as sb: await sb.op(...)``)."""

    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 30.0,
                 *, retries: int = 3, retry_time: float = 30.0,
                 base64_min: int = BASE64_MIN_ELEMENTS,
                 transport: httpx.AsyncBaseTransport | None = None):
        super().__init__(url, token, timeout, retries, retry_time, base64_min)
        self._http = httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=timeout,
                                       transport=transport)

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _send(self, method: str, path: str, body: Any = None, decode: Any = None) -> Any:
        """See `Sandbox._send`."""
        content = None if body is None else self._content(body)
        start, attempt = time.monotonic(), 0
        while True:
            try:
                response = await self._http.request(method, path, content=content)
            except httpx.InvalidURL as exc:
                raise self._unsendable(exc, method, path) from None
            except httpx.HTTPError as exc:
                raise self._no_answer(exc, method, path) from exc
            delay = self._should_retry(response, attempt, start)
            if delay is None:
                return self._answer(response, decode)
            await asyncio.sleep(delay)
            attempt += 1

    async def op(self, name: str, inputs: Mapping[str, Any],
                 requires_grad: Sequence[str] | None = None, grad_output: Any = None, *,
                 encoding: str | None = None) -> Result:
        """See `Sandbox.op`."""
        body = _encoding(_op_body(inputs, requires_grad, grad_output, self.base64_min), encoding)
        return await self._send("POST", _op_path(name), body, Result.from_answer)

    async def eval(self, expression: str, variables: Mapping[str, Any] | None = None,
                   grad_output: Any = None, check: bool | Mapping[str, Any] = False, *,
                   encoding: str | None = None, paths: bool = False, dead: bool = False) -> Result:
        """See `Sandbox.eval`."""
        body = self._eval_request(expression, variables, grad_output, check, paths, dead,
                                  encoding)
        return await self._send("POST", "/api/v1/eval", body, Result.from_answer)

    async def ops(self) -> list[dict]:
        """See `Sandbox.ops`."""
        return await self._send("GET", "/api/v1/ops", decode=lambda a: a["ops"])

    async def examples(self) -> list[dict]:
        """See `Sandbox.examples`."""
        return await self._send("GET", "/api/v1/examples", decode=lambda a: a["examples"])

    async def check(self, op: str | None = None, inputs: Mapping[str, Any] | None = None, *,
                    expression: str | None = None, variables: Mapping[str, Any] | None = None,
                    requires_grad: Sequence[str] | None = None, grad_output: Any = None,
                    value: Any = None, grads: Mapping[str, Any] | None = None,
                    rtol: float | None = None, atol: float | None = None,
                    reveal: bool = True, digits: int | None = None) -> dict:
        """See `Sandbox.check`."""
        body = _check_body(op=op, inputs=inputs, expression=expression, variables=variables,
                          requires_grad=requires_grad, grad_output=grad_output, value=value,
                          grads=grads, rtol=rtol, atol=atol, reveal=reveal,
                          base64_min=self.base64_min, digits=digits)
        return await self._send("POST", "/api/v1/check", body, self._check_report)

    async def batch(self, cases: Sequence[Mapping[str, Any]], *,
                    encoding: str | None = None) -> list[Result | SandboxError]:
        """See `Sandbox.batch`."""
        body = _encoding({"cases": [_case(c, self.base64_min, i)
                                    for i, c in enumerate(cases)]}, encoding)
        return await self._send("POST", "/api/v1/batch", body, self._batch_results)
