"""Demand forecasting: a global LightGBM quantile forecaster, baselines, metrics and
rolling-origin backtests (pure: no I/O, no clock, no environment)."""
