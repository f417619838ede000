"""Planning dashboards served by the predops app (see :mod:`serving.dashboards.router`;
the plan history's routes are in :mod:`serving.dashboards.plan_history`)."""

from predops.serving.dashboards import plan_history
from predops.serving.dashboards.router import router

router.include_router(plan_history.pages)

__all__ = ["router"]
