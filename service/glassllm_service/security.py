"""Security headers on every answer, and the host names the sandbox answers to.

**Headers** (`SecurityHeaders`, on every answer, errors included):

- ``Content-Security-Policy``: everything from the sandbox's own origin and nothing else
  — no other host, no inline script or style, no eval, no plugin; ``data:`` images only
  (Swagger UI's icons). The only inline code is the sandbox's own, allowed by hash: the
  script that starts Swagger UI at ``/docs`` and the style sheet of the contract pages
  (``/docs/contract/``). ``frame-ancestors 'self'``: a page of the same origin may frame
  it (a JupyterHub proxy tile serves the sandbox under a path prefix of the hub's own
  origin), no other site can (clickjacking).
- ``X-Frame-Options: SAMEORIGIN``: the same, for browsers that predate frame-ancestors.
- ``X-Content-Type-Options: nosniff``: a browser takes each answer as the type it says.
- ``Referrer-Policy: same-origin``: no address of the sandbox leaks to another site.

**Trusted hosts** (`TrustedHosts`, ``GLASSLLM_TRUSTED_HOSTS``): a request whose ``Host`` is
not one of the given names (``*.example.org`` matches its subdomains) is refused with 400
``untrusted_host`` before any route runs, which defeats DNS rebinding against a sandbox
on a student's own machine. The default ``*`` answers every host. The probes
(``/healthz``, ``/readyz``) and ``/metrics`` answer any host: an orchestrator calls them
by the pod's address.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable
from typing import Any

from starlette.datastructures import Headers, MutableHeaders

from glassllm_service.http_errors import ApiError, error_response

INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.S)
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def inline_hashes(*html: str) -> dict[str, list[str]]:
    """CSP source expressions ('sha256-…') of every inline <script> and <style> block."""
    found: dict[str, list[str]] = {"script": [], "style": []}
    for text in html:
        for tag, body in INLINE.findall(text):
            digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
            found[tag].append(f"'sha256-{digest}'")
    return found


def content_security_policy(inline_html: Iterable[str] = ()) -> str:
    """The policy: the own origin only, plus the hashes of the sandbox's own inline blocks."""
    hashes = inline_hashes(*inline_html)
    directives = {
        "default-src": ["'self'"],
        "script-src": ["'self'", *hashes["script"]],
        "style-src": ["'self'", *hashes["style"]],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'self'"],
    }
    return "; ".join(f"{name} {' '.join(sources)}" for name, sources in directives.items())


class SecurityHeaders:
    """ASGI middleware: the headers above on every HTTP answer (a route's own win)."""

    def __init__(self, app: Any, csp: str) -> None:
        self.app = app
        self.headers = {"content-security-policy": csp, "x-content-type-options": "nosniff",
                        "x-frame-options": "SAMEORIGIN", "referrer-policy": "same-origin"}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in self.headers.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def host_patterns(text: str) -> list[str]:
    """``GLASSLLM_TRUSTED_HOSTS`` as patterns: names, ``*.`` + a domain, or ``*`` (any).

    Raises ValueError naming the first entry that is not a host name (a scheme, a port, a
    path, a ``*`` anywhere but in front of a dot)."""
    patterns = [p.strip().lower() for p in text.split(",") if p.strip()]
    for p in patterns:
        name = p[2:] if p.startswith("*.") else p
        if p != "*" and not re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*"
                                         r"[a-z0-9])?)*\.?|\[[0-9a-f:.]+\]", name):
            raise ValueError(f"{p!r} is not a host name or *.domain (no scheme, port or path)")
    return patterns or ["*"]


def _host_name(header: str | None) -> str | None:
    """The name of a Host header, without its port; IPv6 literals keep their brackets."""
    if not header:
        return None
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        return header[: end + 1] if end > 0 else None
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class TrustedHosts:
    """ASGI middleware: 400 ``untrusted_host`` unless the Host is a trusted name (above).
    The same matching as Starlette's TrustedHostMiddleware, answered with the sandbox's
    error envelope; the probes and /metrics are open to every host."""

    def __init__(self, app: Any, patterns: list[str]) -> None:
        self.app, self.patterns = app, patterns
        self.any = "*" in patterns

    def trusted(self, host: str | None) -> bool:
        return host is not None and any(
            host == p or (p.startswith("*.") and host.endswith(p[1:])) for p in self.patterns)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if self.any or scope["type"] != "http" or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope).get("host")
        if self.trusted(_host_name(given)):
            await self.app(scope, receive, send)
            return
        shown = (given or "")[:80]
        err = ApiError(400, "untrusted_host", f"the Host header {shown!r} is not a name this"
                       " sandbox answers to (GLASSLLM_TRUSTED_HOSTS)", input="Host")
        await error_response(err)(scope, receive, send)
