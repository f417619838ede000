"""Ingest: adapters turn a source into contract frames; ``run`` validates and writes."""
