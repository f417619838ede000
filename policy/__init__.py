"""predops policy layer."""
