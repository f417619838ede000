"""Shared ``predops`` verb groups that models attach subcommands to.

``eval``, ``train`` and ``forecast`` live in :mod:`pipelines.models_cli`
(``MODEL_VERBS``); ``score`` (``predops score failure``) is defined here so any model's
CLI module can attach to it without importing another model's module.
"""

from __future__ import annotations

import click


@click.group("score")
def score_group() -> None:
    """Score entities with a registered model's champion (e.g. ``score failure``)."""
