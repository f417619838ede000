"""predops models layer."""
