"""The page at ``/`` (H8, Part P) and Swagger UI at ``/docs`` from local assets (H7)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.staticfiles import StaticFiles
from starlette.responses import FileResponse, HTMLResponse
from swagger_ui_bundle import swagger_ui_path

HERE = Path(__file__).resolve().parent.parent


def static_dir(configured: Path | None) -> Path:
    """The page: configured, else shipped in the wheel (service/static), else the repo's."""
    for candidate in (configured, HERE / "static", HERE.parent / "static"):
        if candidate is not None and (candidate / "index.html").is_file():
            return candidate
    raise RuntimeError("static/index.html not found; set GLASSLLM_STATIC_DIR")


def install(app: FastAPI, configured: Path | None) -> None:
    page = static_dir(configured)
    router = APIRouter(include_in_schema=False)

    @router.get("/")
    def index() -> FileResponse:
        return FileResponse(page / "index.html", media_type="text/html")

    @router.get("/docs")
    def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="glassllm sandbox — API",
                                   swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-assets/swagger-ui.css",
                                   swagger_favicon_url="/docs-assets/favicon-32x32.png")

    app.include_router(router)
    app.mount("/static", StaticFiles(directory=page), name="static")
    app.mount("/docs-assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")
