"""predops serving layer."""
