"""The dashboards' static files: their CSS and scripts, and plotly.js from the installed
``plotly`` package (never a CDN)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import plotly
from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, Response

HERE = Path(str(files("predops.serving.dashboards")))
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
STATIC = {
    "dash.css": (HERE / "static" / "dash.css", "text/css"),
    "charts.js": (HERE / "static" / "charts.js", "text/javascript"),
    "approve.js": (HERE / "static" / "approve.js", "text/javascript"),
    "view.js": (HERE / "static" / "view.js", "text/javascript"),
    "plotly.min.js": (PLOTLY_JS, "text/javascript"),
}

router = APIRouter(include_in_schema=False)


@router.get("/static/{name}")
def static(name: str) -> Response:
    """The dashboards' CSS / JS and plotly.js from the installed package."""
    if name not in STATIC:
        raise HTTPException(404, f"no static file {name!r}")
    path, media = STATIC[name]
    return FileResponse(path, media_type=media, headers={"Cache-Control": "max-age=3600"})


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(status_code=204)
