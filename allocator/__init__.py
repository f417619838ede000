"""predops allocator layer."""
