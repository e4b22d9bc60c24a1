"""Every route of an app, as ``(METHOD, path template)``, read from the app itself (its
routers, mounts included), so that a table of routes can be held against it. HEAD is left
out where GET is there: the sandbox answers HEAD wherever it answers GET."""

from __future__ import annotations

from typing import Any


def _walk(routes: list[Any], prefix: str = "") -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for route in routes:
        original = getattr(route, "original_router", None)
        if original is not None:                       # an included router, not flattened
            context = getattr(route, "include_context", None)
            out |= _walk(original.routes, prefix + (getattr(context, "prefix", "") or ""))
            continue
        path = prefix + route.path
        methods = getattr(route, "methods", None)
        if methods is None:                            # a mount: static files under it
            out.add(("GET", path + "/{path}"))
            continue
        out |= {(m, path) for m in methods}
    return out


def app_routes(app: Any) -> set[tuple[str, str]]:
    found = _walk(app.router.routes)
    return {(m, p) for m, p in found if not (m == "HEAD" and ("GET", p) in found)}
