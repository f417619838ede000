"""What LightGBM's training and predictions were told about threads, for the models'
tests."""

from __future__ import annotations

import pytest


def predict_threads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ``num_threads`` of every ``Booster.predict`` call from now on (None where the
    call gave none: LightGBM then runs on every CPU, whatever the training used)."""
    import lightgbm as lgb

    seen: list[object] = []
    real = lgb.Booster.predict

    def spy(self: lgb.Booster, data: object, *args: object, **kwargs: object) -> object:
        seen.append(kwargs.get("num_threads"))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(lgb.Booster, "predict", spy)
    return seen


def train_threads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The ``num_threads`` of every ``lightgbm.train`` call from now on (None where the
    parameters gave none)."""
    import lightgbm as lgb

    seen: list[object] = []
    real = lgb.train

    def spy(params: dict[str, object], *args: object, **kwargs: object) -> object:
        seen.append(params.get("num_threads"))
        return real(params, *args, **kwargs)

    monkeypatch.setattr(lgb, "train", spy)
    return seen
