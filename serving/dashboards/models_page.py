"""The models page (``/models``): the served versions, every registered model's versions
with their metrics beside their baselines and their MLflow runs, the failure champion's
calibration, data freshness and the scheduler's runs; filtered by model, job and run
status and bounded by a time range (:data:`MODELS_RANGE` by default). Its data comes
from :mod:`~predops.serving.dashboards.registry_view`."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse

from predops.serving.auth import page_access
from predops.serving.context import Ctx
from predops.serving.dashboards import calibration, charts, model_links, registry_view, view
from predops.serving.dashboards.router import _page

MODELS_RANGE = "7d"
"""Default time range of the models page: versions trained on data of the last week
(and every version an alias points at) and the runs started in it."""

pages = APIRouter(include_in_schema=False, dependencies=[Depends(page_access)])


@pages.get("/models", response_class=HTMLResponse)
def models_page(request: Request, ctx: Ctx) -> HTMLResponse:
    """Champion / challenger metrics, the failure champion's calibration, data
    freshness, scheduled job runs."""
    models, problem = registry_view.registered_models(ctx)
    found = view.filters(
        request.query_params,
        {
            "model": [m["name"] for m in models],
            "job": registry_view.run_jobs(ctx),
            "status": list(registry_view.RUN_STATUSES),
        },
        labels={"model": "model", "job": "scheduled job", "status": "run status"},
    )
    chosen = view.chosen(found)
    rng = view.time_range(request.query_params, ctx.clock.now(), default=MODELS_RANGE)
    models = registry_view.versions_in_range(
        [m for m in models if m["name"] == chosen.get("model", m["name"])], rng.since, rng.until
    )
    rel = registry_view.failure_reliability(ctx)
    rel_fig = None
    if rel["table"]:
        rel_fig = charts.reliability_plot(
            rel["table"],
            title=f"Reliability of {rel['model']} at {rel['horizon_h']:g} h, held-out rows",
        )
    runs, runs_problem = registry_view.scheduled_runs(
        ctx,
        job=chosen.get("job"),
        status=chosen.get("status"),
        since=rng.since,
        until=rng.until,
    )
    return _page(
        request,
        "models.html",
        "/models",
        models=models,
        registry_problem=problem,
        served=[ctx.failure.status(), ctx.demand.status()],
        rel=rel,
        rel_fig=rel_fig,
        freshness=(fresh := registry_view.freshness(ctx)),
        as_of=[
            ("registry check", ctx.failure.status()["last_check"]),
            *[(f["what"], f["latest"]) for f in fresh if f["what"] == "online node features"],
        ],
        runs=runs,
        runs_problem=runs_problem,
        caveat=calibration.caveat(ctx),
        links=model_links.links(ctx, models),
        filters=found,
        rng=rng,
    )
