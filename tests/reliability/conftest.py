"""Fixtures of the fault tests: the actuator tests' clock (at their plans' T0) and audit
log, and the serving tests' served workspace (for the soak), shared rather than copied."""

from tests.pipelines.actuators.conftest import audit, clock  # noqa: F401
from tests.serving.conftest import served_template, served_workspace  # noqa: F401
