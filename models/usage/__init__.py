"""Per-node usage forecasting: peak-usage quantiles over the next window from a global
LightGBM model, conformal and online interval correction, and the trailing-statistic
rules co-location systems use (pure: no I/O, no clock, no environment)."""
