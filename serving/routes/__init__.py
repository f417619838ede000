"""One router per resource (health, failure, demand, plans, metrics)."""
