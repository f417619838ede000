"""``predops serve``: the REST API and dashboards under uvicorn (a composition root)."""

from __future__ import annotations

import click

from pipelines.settings import Settings


def run_server(settings: Settings, *, host: str, port: int) -> None:
    """Serve ``settings.workspace`` until interrupted; prints the dashboard URL first."""
    import uvicorn

    from serving.app import create_app

    app = create_app(settings)
    click.echo(
        f"predops: workspace {settings.workspace}\n"
        f"predops: dashboards at http://{host}:{port}/  (API docs at /docs; Ctrl-C stops)",
        err=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True)
@click.pass_obj
def serve_command(settings: Settings, host: str, port: int) -> None:
    """Serve the REST API (/v1/...), /metrics and the planning dashboards."""
    run_server(settings, host=host, port=port)
