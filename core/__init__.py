"""Shared contracts of predops: frame schemas, validation, model outputs, actions.

This package imports nothing else from predops (see DESIGN.md's layer rule).
"""
