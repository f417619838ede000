"""The API's interactive documentation, with nothing fetched from the network.

FastAPI's own ``/docs`` and ``/redoc`` pages load Swagger UI and ReDoc from a CDN, so on
a cluster without Internet access (most production clusters) they are blank. Here
``/docs`` loads Swagger UI from the installed ``fastapi-offline`` package's static
files, served under ``/static/api-docs/`` the way the dashboards serve plotly.js. There
is no ``/redoc``: ReDoc fetches its branding logo from its CDN whatever its options (the
browser test that refuses the network caught it), and Swagger UI covers the same use.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, HTTPException
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, Response

ASSETS = Path(fastapi_offline.__file__).parent / "static"
FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon.png": "image/png",
}
PREFIX = "/static/api-docs"

router = APIRouter(include_in_schema=False)


@router.get("/docs", response_class=HTMLResponse)
def swagger_ui() -> HTMLResponse:
    """Swagger UI over ``/openapi.json``."""
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="predops API",
        swagger_js_url=f"{PREFIX}/swagger-ui-bundle.js",
        swagger_css_url=f"{PREFIX}/swagger-ui.css",
        swagger_favicon_url=f"{PREFIX}/favicon.png",
    )


@router.get(PREFIX + "/{name}")
def asset(name: str) -> Response:
    """One of the files above, from the installed package."""
    if name not in FILES:
        raise HTTPException(404, f"no API documentation file {name!r}")
    return FileResponse(
        ASSETS / name, media_type=FILES[name], headers={"Cache-Control": "max-age=3600"}
    )
