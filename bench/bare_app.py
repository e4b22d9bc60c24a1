"""A bare Starlette app for bench/service.py: the HTTP floor of the small-request ratio.

GET /healthz answers a fixed JSON; POST /echo reads the body and answers a fixed JSON of
a small op's size. Served by the same uvicorn (httptools, uvloop) as the sandbox, with no
middleware, no logging and no glassllm: what a POST costs beside a GET before any work.
"""

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_HEALTH = b'{"status":"ok"}'
_ANSWER = b'{"value":[' + b",".join([b"0.125"] * 32) + b'],"grads":{"a":[' + \
    b",".join([b"0.0625"] * 32) + b"]},\"warnings\":[]}"


async def healthz(request: Request) -> Response:
    return Response(_HEALTH, media_type="application/json")


async def echo(request: Request) -> Response:
    await request.body()
    return Response(_ANSWER, media_type="application/json")


app = Starlette(routes=[Route("/healthz", healthz), Route("/echo", echo, methods=["POST"])])
