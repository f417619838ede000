"""Scheduled jobs (``predops schedule``): config, run table, steps, runner, APScheduler."""
