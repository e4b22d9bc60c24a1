"""Every refusal is an `ApiError` answered as JSON that names the input and the rule (H4).

Error body: ``{"error": {"status", "code", "message", "op", "input", ...}}``. Nothing here
ever shows a stack trace: an unexpected exception becomes a generic 500 and is logged.
"""

from __future__ import annotations

import logging

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from glassllm.errors import ComputeError, InputError, LimitError, ShapeError

log = logging.getLogger("glassllm.service")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, *, op: str | None = None,
                 input: str | None = None, headers: dict | None = None, **extra):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.op, self.input, self.headers, self.extra = op, input, headers or {}, extra

    def body(self) -> dict:
        err = {"status": self.status, "code": self.code, "message": self.message,
               "op": self.op, "input": self.input, **self.extra}
        return {"error": err}


def error_response(err: ApiError) -> Response:
    return Response(orjson.dumps(err.body()), status_code=err.status,
                    media_type="application/json", headers=err.headers)


async def _api_error(request: Request, exc: ApiError) -> Response:
    return error_response(exc)


# The one place a library error becomes an HTTP status (H4): the first class of the
# error's MRO listed here decides, so an expression's limit (ExprError and LimitError) is
# a 413 like every other limit.
STATUS: dict[type, int] = {LimitError: 413, ShapeError: 400, ComputeError: 400, InputError: 422}


def status_of(exc: InputError) -> int:
    return next(STATUS[cls] for cls in type(exc).__mro__ if cls in STATUS)


def from_input_error(exc: InputError) -> ApiError:
    """The ApiError of a library refusal: its status, code, message, op and input, and
    any details it carries (an expression's position and span)."""
    detail = exc.detail() if hasattr(exc, "detail") else {}
    return ApiError(status_of(exc), exc.code, exc.message, op=getattr(exc, "op", None),
                    input=exc.input, **detail)


async def _input_error(request: Request, exc: InputError) -> Response:
    return error_response(from_input_error(exc))


async def _memory_error(request: Request, exc: MemoryError) -> Response:
    return error_response(ApiError(413, "too_large", "the computation ran out of memory",
                                   op=getattr(request.state, "op", None)))


async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    msg = f"no route {request.url.path}" if exc.status_code == 404 else str(exc.detail)
    return error_response(ApiError(exc.status_code, code, msg, headers=exc.headers))


async def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(p) for p in first.get("loc", ()))
    return error_response(ApiError(422, "invalid_request", f"{where}: {first.get('msg', '')}",
                                   input=where or None))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return error_response(ApiError(500, "internal_error",
                                   "the sandbox failed unexpectedly; this is a bug, please report"
                                   " the request that caused it"))


def install(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(InputError, _input_error)
    app.add_exception_handler(MemoryError, _memory_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected)
