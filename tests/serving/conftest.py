"""The serving tests' fixtures live in ``tests/served_workspace.py`` (registered in the
root conftest, so one session builds the served workspace once)."""

from tests.served_workspace import settings_for

__all__ = ["settings_for"]
