"""predops features layer."""
