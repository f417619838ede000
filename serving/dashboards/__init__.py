"""Planning dashboards served by the predops app (see :mod:`serving.dashboards.router`)."""

from predops.serving.dashboards.router import router

__all__ = ["router"]
