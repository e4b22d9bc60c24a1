"""One router per resource: ops, health, pages (FastAPI "Bigger Applications")."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.routing import APIRoute


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
