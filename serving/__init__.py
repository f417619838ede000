"""The predops server: REST API and planning dashboards (FastAPI), a composition root.

``create_app(settings, config)`` in :mod:`serving.app` builds the application; ``predops
serve`` runs it under uvicorn. Models come from the MLflow registry alias ``champion``
through :class:`serving.models.ModelSlot`, which reloads when the alias moves and keeps the
last good model when the registry is unreachable.
"""
