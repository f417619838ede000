"""The REST API's request and response bodies (pydantic models at the boundary only).

Error convention: every 4xx / 5xx answer has the body :class:`ErrorBody` —
``{"error": "<what is wrong, in words>", "field": "<where>" | null}``. ``field`` is a
dotted path into the request (``body.nodes.0.features.gpu_temp_c__max_6h``,
``query.limit``, ``path.plan_id``, ``header.authorization``) when one part of the request
is to blame, else null. Status codes: 401 missing / wrong / expired token, 403 role too
weak, 404 a named resource does not exist (node ids, series ids, plan ids), 409 plan not
approved (apply), 413 body or batch too large, 422 invalid input, 503 the server cannot
answer yet (no model loaded, online store unusable).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

T = TypeVar("T")


def unicode_text(value: T) -> T:
    """``value`` unless it is a string holding a lone surrogate (ValueError).

    JSON may spell one as an escape (``"\\ud800"``) and Python's parser keeps it, but it
    is no character: nothing downstream can encode it (UTF-8 answers, polars, Arrow), so
    every string of a request body is checked where it comes in (:data:`Text`)."""
    if not isinstance(value, str):
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"holds a lone surrogate (U+{ord(value[exc.start]):04X}) at position "
            f"{exc.start}: not Unicode text"
        ) from None
    return value


Text = Annotated[str, AfterValidator(unicode_text)]
"""A request string: any Unicode text, no lone surrogates (422 naming the field)."""
StrictText = Annotated[StrictStr, AfterValidator(unicode_text)]

NODE_ID = r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$"
SERIES_ID = r"^[A-Za-z0-9][A-Za-z0-9._:/=-]{0,255}$"
PLAN_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
Quantile = Literal["p10", "p50", "p90"]
QUANTILES: tuple[Quantile, ...] = ("p10", "p50", "p90")
FeatureValue = Annotated[StrictFloat | StrictInt | StrictStr | None, AfterValidator(unicode_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every error answer (see the module docstring)."""

    error: str
    field: str | None = None


ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody} for code in (401, 403, 404, 409, 413, 422, 503)
}
"""``responses=`` for routes: the error body documented for every status."""


# ---------------------------------------------------------------- provenance
class ProvenanceOut(BaseModel):
    """Which model version, feature set and data a prediction came from."""

    model_name: str
    model_version: str
    feature_set_hash: str
    data_cutoff: datetime
    run_id: str | None = None


class ReasonOut(BaseModel):
    """One feature's signed contribution to the failure log-odds, in words."""

    feature: str
    contribution: float
    text: str


# ---------------------------------------------------------------- failure
class NodeFeatures(_Strict):
    """One node given by its feature vector instead of its id: every model feature
    (``GET /v1/failure/features`` lists them) with a number, a string for categorical
    features, or null when unknown. NaN and infinities are refused."""

    node_id: Text | None = Field(default=None, pattern=NODE_ID, description="a label echoed back")
    features: dict[StrictText, FeatureValue]


class ScoreRequest(_Strict):
    """Nodes to score: ``node_ids`` (features from the online store) and / or ``nodes``
    (feature vectors in the body); at most ``max_batch`` in all."""

    node_ids: list[Text] = Field(default_factory=list, description="ids in the online store")
    nodes: list[NodeFeatures] = Field(default_factory=list)
    horizons_hours: list[float] | None = Field(
        default=None, description="horizons to answer (hours); default: every model horizon"
    )
    explain: int = Field(
        default=10,
        ge=0,
        le=10_000,
        description="reasons for this many riskiest nodes per horizon (TreeSHAP, ~2 ms each)",
    )


class HorizonRisk(BaseModel):
    horizon_hours: float
    p_fail: float = Field(ge=0.0, le=1.0, description="calibrated P(failure within horizon)")
    reasons: list[ReasonOut] = Field(description="top contributions; empty when not explained")


class NodeScore(BaseModel):
    """One node's answer. ``status``: ``scored``; ``stale`` (last sample older than the
    server's ``max_data_age``: not scored); ``future`` (last sample after the server's
    clock: not scored)."""

    node_id: str | None
    source: Literal["online", "body"]
    status: Literal["scored", "stale", "future"]
    last_sample_at: datetime | None = None
    risks: list[HorizonRisk]


class ScoreResponse(BaseModel):
    as_of: datetime
    model: ProvenanceOut
    online_as_of: datetime | None = Field(description="when the online features were built")
    results: list[NodeScore]


class FeatureList(BaseModel):
    """What a feature vector must hold for the served model."""

    model_version: str
    numeric: list[str]
    categorical: dict[str, list[str]] = Field(description="feature -> known levels")


class FleetRiskItem(BaseModel):
    node_id: str
    pool: str | None
    rack: str | None
    p_fail: float
    last_sample_at: datetime | None
    reasons: list[ReasonOut]


class FleetRiskPage(BaseModel):
    """One page of the fleet's fresh nodes, riskiest first."""

    as_of: datetime
    horizon_hours: float
    model: ProvenanceOut
    online_as_of: datetime
    total: int = Field(description="fresh nodes matching the filters")
    stale: int = Field(description="nodes matching the filters not scored: stale or future")
    offset: int
    limit: int
    next_offset: int | None
    items: list[FleetRiskItem]


# ---------------------------------------------------------------- demand
class ForecastRequest(_Strict):
    series_ids: list[Text] | None = Field(default=None, description="default: every series")
    horizons: list[int] | None = Field(
        default=None, description="steps ahead (in the model's interval); default: all"
    )
    quantiles: list[Quantile] = Field(default_factory=lambda: list(QUANTILES), min_length=1)


class ForecastPoint(BaseModel):
    horizon: int = Field(description="steps ahead of issued_at, in the model's interval")
    valid_at: datetime
    quantiles: dict[str, float]
    method: str


class SeriesForecast(BaseModel):
    series_id: str
    issued_at: datetime
    points: list[ForecastPoint]
    weights: dict[str, dict[str, float]] | None = Field(
        default=None,
        description="a combination's candidate weights per horizon bucket for this series "
        "when these forecasts were issued (bucket -> candidate -> weight); null for a "
        "single model",
    )


class SelectionOut(BaseModel):
    """How the served combination chooses: its candidates, weighted on each series'
    own validation windows, every one at or before the data cutoff."""

    method: str
    candidates: list[str]
    buckets: list[str] = Field(description="horizon buckets, shortest first")
    weighting: str
    data_cutoff: datetime
    window_origins: list[datetime]
    window_last_target: datetime
    lightgbm_rounds: int | None = Field(
        default=None,
        description="boosting rounds of the LightGBM candidate, chosen on its held-out "
        "windows; null without one",
    )
    lightgbm_anchor: str | None = Field(
        default=None,
        description="what the LightGBM candidate's target is measured from ('last' "
        "sample or 24 h 'level'), chosen on the fit data; null without one",
    )


class ForecastResponse(BaseModel):
    model: ProvenanceOut
    selection: SelectionOut | None = Field(
        default=None, description="null when the served model is not a combination"
    )
    horizons: list[int]
    series: list[SeriesForecast]


# ---------------------------------------------------------------- plans
class ActionOut(BaseModel):
    kind: str
    target: str
    params: dict[str, Any]
    reason: str
    evidence: dict[str, Any]
    not_before: datetime | None
    expires: datetime | None
    expected_benefit: float | None
    expected_cost: float | None
    idempotency_key: str


class SkipOut(BaseModel):
    kind: str
    target: str
    reason: str
    detail: str


class Approval(BaseModel):
    """Who approved a plan and when (kept in the workspace; survives restarts)."""

    plan_id: str
    approved_by: str
    role: str
    approved_at: datetime
    comment: str = ""


class PlanOut(BaseModel):
    plan_id: str
    created_at: datetime
    data_cutoff: datetime
    dry_run: bool
    actions: list[ActionOut]
    skips: list[SkipOut]
    budgets_used: dict[str, int]
    provenance: list[ProvenanceOut]
    alerts: list[str]
    inputs: dict[str, Any] | None = Field(default=None, description="what each input was")
    approval: Approval | None


class ApproveRequest(_Strict):
    comment: Text = Field(default="", max_length=1000)


class ActionOutcomeOut(BaseModel):
    key: str
    kind: str
    target: str
    outcome: str
    reason: str = Field(description="why this run skipped it (empty when it ran or would)")
    detail: str
    why: str = Field(default="", description="the action's own reason, from the plan")
    params: dict[str, Any] = Field(default_factory=dict, description="what the action does")


class ApplyResponse(BaseModel):
    plan_id: str
    mode: Literal["dry_run", "execute"]
    counts: dict[str, int]
    actions: list[ActionOutcomeOut]
    state: str = Field(description="where re-validation read the cluster: lake or kubernetes")
    authorised: dict[str, Any] = Field(
        default_factory=dict,
        description="what allowed it: dry_run, or the approval record (and four_eyes)",
    )
    problems: list[ActionOutcomeOut] = Field(
        default_factory=list, description="actions that failed or had no actuator"
    )
    policy: dict[str, Any] = Field(
        description="the budgets and disruption values re-validation used, and their origin "
        "(durations in seconds)"
    )
