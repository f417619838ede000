"""Fixtures of the fault tests: the actuator tests' clock (at their plans' T0) and audit
log, shared rather than copied (the served workspace comes from the root conftest)."""

from tests.pipelines.actuators.conftest import audit, clock  # noqa: F401
