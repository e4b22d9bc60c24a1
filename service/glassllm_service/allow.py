"""Which methods each path answers: HEAD wherever GET (`allow_head`), and every method of
the path in a 405's ``Allow`` (`AllowEveryMethod`, RFC 9110 §15.5.6).

Starlette's router stops at the first route whose path matches and answers with that
route's methods only: ``PUT /api/v1/ops/add`` said ``Allow: GET`` (the ``GET
/api/v1/ops/{name}`` route) although POST and HEAD work there too. This middleware
rewrites the header of every 405 from all the routes that match the path.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.routing import APIRoute
from starlette.routing import Mount

STATIC_METHODS = {"GET", "HEAD"}              # StaticFiles answers these only


def allow_head(router: APIRouter) -> APIRouter:
    """Answer HEAD wherever the router answers GET (RFC 9110 §9.3.2): load balancers, link
    checkers and `curl -I` probe with HEAD, and a 405 for ``HEAD /`` reads as "no page".

    FastAPI routes answer only the methods they name (a Starlette mount such as /static
    already answers HEAD). Each GET route without a HEAD gets a twin out of the schema, so
    OpenAPI keeps one operation (and one operationId) per path; the server sends the
    headers and drops the body. Idempotent: a route that has its twin is left alone.
    """
    routes = [r for r in router.routes if isinstance(r, APIRoute)]
    has_head = {r.path for r in routes if "HEAD" in r.methods}
    for r in routes:
        if "GET" in r.methods and r.path not in has_head:
            router.add_api_route(r.path.removeprefix(router.prefix), r.endpoint,
                                 methods=["HEAD"], include_in_schema=False,
                                 response_class=r.response_class, name=f"{r.name}_head")
    return router


def flat_routes(routes: list, prefix: str = "") -> list[tuple[Any, str]]:
    """(route, prefix) pairs with the routers FastAPI includes opened up (FastAPI ≥ 0.16x
    keeps an included router as one entry holding its original routes)."""
    out = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            context = getattr(route, "include_context", None)
            out += flat_routes(inner.routes, prefix + getattr(context, "prefix", ""))
        else:
            out.append((route, prefix))
    return out


def allowed_methods(routes: list, path: str) -> list[str]:
    """The methods of every route whose path template matches `path`, sorted."""
    methods: set[str] = set()
    for route, prefix in flat_routes(routes):
        if isinstance(route, Mount):
            if path.startswith(prefix + route.path + "/"):
                methods |= STATIC_METHODS
            continue
        regex = getattr(route, "path_regex", None)
        if regex is None:
            continue
        if prefix:
            if not path.startswith(prefix):
                continue
            if not regex.match(path[len(prefix):]):
                continue
        elif not regex.match(path):
            continue
        methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def template_of(routes: list, path: str) -> str | None:
    """The path template of the first route whose template matches `path` (a mount: its
    prefix), or None: a bounded label for a request the router did not name (a mount, a
    route FastAPI adds itself, a 401 answered before routing)."""
    for route, prefix in flat_routes(routes):
        if isinstance(route, Mount):
            if path.startswith(prefix + route.path + "/"):
                return prefix + route.path
            continue
        regex = getattr(route, "path_regex", None)
        if regex is None or not path.startswith(prefix):
            continue
        if regex.match(path[len(prefix):]):
            return prefix + route.path
    return None


class AllowEveryMethod:
    def __init__(self, app: Any, routes: list) -> None:
        self.app, self.routes = app, routes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_allow(message: dict) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                allow = ", ".join(allowed_methods(self.routes, scope["path"])).encode()
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"allow"]
                message = {**message, "headers": [*headers, (b"allow", allow)]}
            await send(message)

        await self.app(scope, receive, send_allow)
