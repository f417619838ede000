"""Adapters for the public traces (read from any path in the publishers' formats)."""
