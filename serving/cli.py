"""``predops serve``: the REST API and dashboards under uvicorn (a composition root)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from pipelines.settings import Settings
from serving.config import ServeConfig


def run_server(
    settings: Settings, *, host: str, port: int, config: ServeConfig | None = None
) -> None:
    """Serve ``settings.workspace`` until interrupted; prints the dashboard URL first."""
    import uvicorn

    from serving.app import create_app

    app = create_app(settings, config)
    click.echo(
        f"predops: workspace {settings.workspace}\n"
        f"predops: dashboards at http://{host}:{port}/  (API docs at /docs; Ctrl-C stops)",
        err=True,
    )
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


@click.command("serve")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Server TOML ([server], [[tokens]]); PREDOPS_API_TOKEN adds an operator token.",
)
@click.option("--host", default=None, help="Default: [server] host, else 127.0.0.1.")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Default: 8080.")
@click.option(
    "--hash-token",
    is_flag=True,
    help="Read a secret on stdin, print its sha256 for [[tokens]] and exit.",
)
@click.pass_obj
def serve_command(
    settings: Settings,
    config_path: Path | None,
    host: str | None,
    port: int | None,
    hash_token: bool,
) -> None:
    """Serve the REST API (/v1/...), /metrics and the planning dashboards."""
    from pipelines.scheduler.config import ConfigError
    from serving.config import load_serve_config, token_digest

    if hash_token:
        secret = sys.stdin.read().strip()
        if not secret:
            raise click.UsageError("--hash-token reads the secret on stdin; got nothing")
        click.echo(token_digest(secret))
        return
    try:
        config = load_serve_config(config_path, os.environ)
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from None
    run_server(
        settings,
        host=host or config.host,
        port=port if port is not None else config.port,
        config=config,
    )
