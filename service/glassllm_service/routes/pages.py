"""The page at ``/`` (H8, Part P) and Swagger UI at ``/docs`` from local assets (H7).

FastAPI writes OpenAPI 3.1, which Swagger UI reads from version 5 on (4.x answers "Unable
to render this definition"). The assets come from the `fastapi-offline` wheel, which ships
Swagger UI 5 for exactly this purpose (no CDN) and depends on nothing but FastAPI; we serve
its files and write the page ourselves. Swagger UI is SmartBear's, Apache-2.0 (that
package's README says so); fastapi-offline itself is MIT.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from starlette.responses import HTMLResponse

from glassllm_service.allow import allow_head
from glassllm_service.files import FileResponse, StaticFiles, static_dir

# swagger-ui-bundle.js, swagger-ui.css (Swagger UI 5.x), favicon.png
SWAGGER_UI = Path(str(importlib.resources.files("fastapi_offline") / "static"))


def swagger_ui() -> HTMLResponse:
    """/docs: Swagger UI from local assets. Its one inline script (the start of Swagger UI)
    is allowed by hash in the Content-Security-Policy (glassllm_service/security.py)."""
    # relative addresses (the page is /docs): the sandbox may sit under a path prefix
    return get_swagger_ui_html(openapi_url="openapi.json", title="glassllm sandbox — API",
                               swagger_js_url="docs-assets/swagger-ui-bundle.js",
                               swagger_css_url="docs-assets/swagger-ui.css",
                               swagger_favicon_url="docs-assets/favicon.png")


def install(app: FastAPI, configured: Path | None) -> None:
    page = static_dir(configured)
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def index() -> FileResponse:
        return FileResponse(page / "index.html", media_type="text/html")

    @router.get("/docs")
    def docs() -> HTMLResponse:
        return swagger_ui()

    app.include_router(allow_head(router))           # HEAD / as well as GET /
    app.mount("/static", StaticFiles(directory=page), name="static")
    app.mount("/docs-assets", StaticFiles(directory=SWAGGER_UI), name="docs-assets")
