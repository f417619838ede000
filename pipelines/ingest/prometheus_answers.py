"""The shape of the Prometheus HTTP API's ``data``, checked in one place.

Every field the adapter reads is checked here before it is used, so an answer from a
broken proxy, a Prometheus look-alike or a hostile server gives one
:class:`MalformedAnswer` naming the series (by its labels) and the field, never an
``AttributeError`` or a half-converted frame. Sample values are decimal strings as
Prometheus writes them (``"NaN"``, ``"+Inf"`` and ``"-Inf"`` included, which parse to
floats and are left to validation), or JSON numbers; timestamps are JSON numbers of
seconds since 1970.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_TS_MIN = datetime(1, 1, 2, tzinfo=UTC).timestamp()
_TS_MAX = datetime(9999, 12, 31, tzinfo=UTC).timestamp()


class MalformedAnswer(ValueError):
    """``data`` is not what the API returns; the message names the field."""


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a ``matrix`` answer: its labels and samples (seconds, value)."""

    labels: Mapping[str, str]
    stamps: list[float]
    values: list[float]


def show_labels(labels: Mapping[str, str]) -> str:
    """``{instance="a:9100", job="node"}``, as PromQL writes a series."""
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: ``a dict``, ``an int``, ``null``."""
    if value is None:
        return "null"
    name = type(value).__name__
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _number(value: Any) -> float | None:
    """A JSON number or a decimal string as a float; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _labels(series: Any, where: str) -> dict[str, str]:
    if not isinstance(series, dict):
        raise MalformedAnswer(f"{where} is {_kind(series)}, expected a series object")
    if "metric" not in series:
        raise MalformedAnswer(f"{where} has no metric (its labels)")
    metric = series["metric"]
    if not isinstance(metric, dict):
        raise MalformedAnswer(f"{where} metric is {_kind(metric)}, expected an object")
    for name, value in metric.items():
        if not isinstance(value, str):
            raise MalformedAnswer(f"{where} label {name!r} is {_kind(value)}, expected a string")
    return metric


def _samples(raw: Any, where: str) -> tuple[list[float], list[float]]:
    if not isinstance(raw, list):
        raise MalformedAnswer(f"{where}: values is {_kind(raw)}, expected a list")
    stamps: list[float] = []
    values: list[float] = []
    for i, sample in enumerate(raw):
        at = f"{where}: values[{i}]"
        if not isinstance(sample, list) or len(sample) != 2:
            size = f"has {len(sample)} element(s)" if isinstance(sample, list) else "is"
            raise MalformedAnswer(f'{at} {size} {str(sample)[:80]}, expected [timestamp, "value"]')
        t, v = sample
        ts = None if isinstance(t, str) else _number(t)
        if ts is None or not math.isfinite(ts) or not _TS_MIN <= ts <= _TS_MAX:
            raise MalformedAnswer(
                f"{at} timestamp {t!r} is not a number of seconds since 1970 in years 1..9999"
            )
        value = _number(v)
        if value is None:
            raise MalformedAnswer(f"{at} value {v!r} is not a number")
        stamps.append(ts)
        values.append(value)
    return stamps, values


def matrix(data: Any) -> list[Series]:
    """The series of a ``query_range`` answer (``resultType: matrix``).

    A series without ``values`` has no float samples (Prometheus leaves the key out of a
    series that holds only native histograms) and yields no rows.
    """
    if not isinstance(data, dict):
        raise MalformedAnswer(f"data is {_kind(data)}, expected an object with a matrix")
    if data.get("resultType") != "matrix":
        raise MalformedAnswer(f"resultType {data.get('resultType')!r}, expected 'matrix'")
    result = data.get("result")
    if result is None:
        return []
    if not isinstance(result, list):
        raise MalformedAnswer(f"result is {_kind(result)}, expected a list of series")
    out = []
    for i, raw in enumerate(result):
        labels = _labels(raw, f"result[{i}]")
        stamps, values = _samples(raw.get("values", []), f"series {show_labels(labels)}")
        out.append(Series(labels, stamps, values))
    return out


def label_values(data: Any) -> list[str]:
    """The values of a label-values answer (``/api/v1/label/<name>/values``)."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise MalformedAnswer(f"data is {_kind(data)}, expected a list of label values")
    for i, value in enumerate(data):
        if not isinstance(value, str):
            raise MalformedAnswer(f"data[{i}] is {_kind(value)}, expected a string")
    return data


def series_labels(data: Any) -> list[dict[str, str]]:
    """The label sets of a series answer (``/api/v1/series``)."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise MalformedAnswer(f"data is {_kind(data)}, expected a list of label sets")
    out = []
    for i, labels in enumerate(data):
        if not isinstance(labels, dict):
            raise MalformedAnswer(f"data[{i}] is {_kind(labels)}, expected a label set")
        for name, value in labels.items():
            if not isinstance(value, str):
                raise MalformedAnswer(
                    f"data[{i}] label {name!r} is {_kind(value)}, expected a string"
                )
        out.append(labels)
    return out
