"""``predops serve``: the REST API and dashboards under uvicorn (a composition root)."""

from __future__ import annotations

import os
import secrets
import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import click

from predops.pipelines.workspace.private import write_private_text
from predops.pipelines.workspace.settings import Settings
from predops.serving.config import ApiToken, ServeConfig

DEMO_MAX_DATA_AGE = timedelta(hours=12)
"""How long the demo's server counts the simulated fleet's data as fresh: the fleet
stops reporting when the demo's simulation ends, and a newcomer should still see risk
scores after lunch. A real deployment keeps the default (30 min) and the scheduler."""
DEMO_TOKEN_FILE = "demo-operator-token"


def demo_server_config(settings: Settings) -> tuple[ServeConfig, Path | None]:
    """The demo's server configuration: the environment's, data fresh for
    :data:`DEMO_MAX_DATA_AGE`, and — when no token is configured — a new random operator
    token whose secret is written to ``<workspace>/demo-operator-token`` (mode 0600; the
    secret itself is never printed or logged). Returns the configuration and that file."""
    from predops.serving.config import load_serve_config, token_digest

    config = load_serve_config(None, os.environ)
    config = replace(config, max_data_age=max(config.max_data_age, DEMO_MAX_DATA_AGE))
    if config.tokens:
        return config, None
    secret = secrets.token_urlsafe(24)
    path = settings.workspace / DEMO_TOKEN_FILE
    write_private_text(path, secret + "\n")  # 0600, even over an older, more open file
    token = ApiToken("demo", "operator", token_digest(secret))
    return replace(config, tokens=(token,)), path


def run_server(
    settings: Settings, *, host: str, port: int, config: ServeConfig | None = None
) -> None:
    """Serve ``settings.workspace`` until interrupted; prints the dashboard URL first."""
    import uvicorn

    from predops.serving.app import create_app

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
    from predops.pipelines.workspace.config import ConfigError
    from predops.serving.config import load_serve_config, token_digest

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
