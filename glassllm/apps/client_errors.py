"""The client's errors (`glassllm.client`): one exception per HTTP status, each in its family.

Every failure of a sandbox call is a `SandboxError` naming the URL it tried. An error
answer (H4) becomes the subclass its status chooses (`InvalidInputError` for 422,
`TooLargeError` for 413, ...), a status without its own class its family (`ClientError`
for 4xx, `ServerError` for 5xx); no answer at all is a `NoAnswerError`. Plain Python: the
client (`glassllm.apps.client`) raises them and gives them under its own name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

__all__ = [
    "BY_STATUS",
    "BadAnswerError",
    "BadRequestError",
    "BusyError",
    "ClientError",
    "InvalidInputError",
    "InvalidURLError",
    "NoAnswerError",
    "NotFoundError",
    "SandboxError",
    "ServerError",
    "TimedOutError",
    "TooLargeError",
    "UnreachableError",
    "UnsupportedMediaTypeError",
    "asked",
    "error_from",
    "no_answer",
]


class SandboxError(Exception):
    """Any failure of a sandbox call; most often an error answer of the sandbox (H4):
    ``{"error": {status, code, message, op, input}}``.

    Attributes: ``status`` (HTTP status; None when no answer came), ``code`` (e.g.
    ``"invalid_input"``, ``"unreachable"``), ``input`` (the input or field it names, or
    None), ``op`` (the op, or None), ``message``, ``body`` (the whole error object, with
    extra keys such as ``position``) and ``url`` (what was asked: ``"POST http://…"``).
    str() is ``"<status> <code>: <message> (<url>)"``.
    """

    def __init__(self, status: int | None, code: str, message: str, *,
                 input: str | None = None, op: str | None = None, body: dict | None = None,
                 url: str | None = None):
        head = f"{code}: {message}" if status is None else f"{status} {code}: {message}"
        super().__init__(head if url is None else f"{head} ({url})")
        self.status, self.code, self.message = status, code, message
        self.input, self.op, self.body, self.url = input, op, body or {}, url


class ClientError(SandboxError):
    """A 4xx answer: the request was refused; sending it again will not help."""


class ServerError(SandboxError):
    """A 5xx answer."""


class BadRequestError(ClientError):
    """400: NumPy refused the shapes (``shape_error``, ``numpy_error``)."""


class NotFoundError(ClientError):
    """404: no such op or route (``unknown_op`` carries ``close`` matches in ``body``)."""


class TooLargeError(ClientError):
    """413: a size limit (H5) would be passed; ``input`` names what is too large."""


class UnsupportedMediaTypeError(ClientError):
    """415: the body was not sent as JSON."""


class InvalidInputError(ClientError):
    """422: an input does not fit its kind, or the request is malformed."""


class BusyError(ServerError):
    """503: every compute slot was busy, still after the client's retries."""


class BadAnswerError(SandboxError):
    """An answer that is not the sandbox's: not JSON (a proxy's HTML page with 200), or
    JSON without what the endpoint answers. ``status`` is the answer's."""


class NoAnswerError(SandboxError):
    """No HTTP answer came (``status`` None): the connection failed or broke."""


class UnreachableError(NoAnswerError):
    """Nothing answers at the URL (connection refused, unknown host, no route); the
    message says how to start a sandbox."""


class TimedOutError(NoAnswerError):
    """No answer within the client's ``timeout`` seconds (connecting, sending or reading)."""


class InvalidURLError(SandboxError, ValueError):
    """A URL that cannot be asked, before anything is sent (also a ValueError): the URL
    given is not an ``http://`` or ``https://`` URL with a host (raised by the
    constructor), or a call's URL is one httpx refuses to send (``URL too long``: an id,
    op name or student id tens of thousands of characters long)."""


BY_STATUS: dict[int, type[SandboxError]] = {
    # the statuses with a class of their own; any other: ClientError or ServerError
    400: BadRequestError, 404: NotFoundError, 413: TooLargeError,
    415: UnsupportedMediaTypeError, 422: InvalidInputError, 503: BusyError,
}


def asked(response: httpx.Response) -> str:
    """``"POST http://host/api/v1/ops/mul"``: the request an answer answers."""
    return f"{response.request.method} {response.request.url}"


def error_from(response: httpx.Response) -> SandboxError:
    """The typed exception of an error answer; a body that is not the sandbox's (a proxy's
    HTML page) still gives the status and the start of the text."""
    status = response.status_code
    try:
        err = response.json()["error"]
        code, message = str(err.get("code", "http_error")), str(err.get("message", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        err, code = {}, "http_error"
        message = ("the answer is not the sandbox's (a proxy in front of it?): "
                   + (response.text[:200] or "(empty)"))
    cls = BY_STATUS.get(status) or (ClientError if status < 500 else ServerError)
    return cls(status, code, message, input=err.get("input"), op=err.get("op"), body=err,
               url=asked(response))


def no_answer(exc: httpx.HTTPError, asked: str, hint: str) -> NoAnswerError:
    """The `NoAnswerError` of a transport failure of ``asked`` (``"POST http://…"``)."""
    import httpx  # the client's own dependency; the exceptions above need none
    if isinstance(exc, httpx.TimeoutException):
        return TimedOutError(None, "timeout", f"no answer in time ({type(exc).__name__})",
                             url=asked)
    if isinstance(exc, httpx.ConnectError):
        return UnreachableError(None, "unreachable",
                                f"nothing answers there ({exc or 'connection failed'}); {hint}",
                                url=asked)
    return NoAnswerError(None, "no_answer",
                         f"the connection failed before an answer came ({type(exc).__name__}:"
                         f" {exc})", url=asked)
