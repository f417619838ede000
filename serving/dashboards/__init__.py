"""Planning dashboards served by the predops app (see :mod:`serving.dashboards.router`;
the plan history's, node page's and models page's routes are in their own modules)."""

from predops.serving.dashboards import models_page, node_page, plan_history
from predops.serving.dashboards.router import router

for _pages in (plan_history.pages, node_page.pages, models_page.pages):
    router.include_router(_pages)

__all__ = ["router"]
