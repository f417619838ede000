"""predops pipelines layer."""
