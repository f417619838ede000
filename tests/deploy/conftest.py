"""Fixtures of the deploy tests: every overlay rendered once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.k8s import OVERLAYS, Obj, copy_tree, render


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Obj]]:
    """Overlay name -> the objects ``kubectl kustomize`` renders, fake secrets filled in."""
    root = copy_tree(tmp_path_factory.mktemp("deploy"))
    return {name: render(root, name) for name in OVERLAYS}


@pytest.fixture(params=OVERLAYS)
def overlay(request: pytest.FixtureRequest, rendered: dict[str, list[Obj]]) -> list[Obj]:
    """Each overlay's rendered objects in turn."""
    objects: list[Obj] = rendered[request.param]
    return objects


@pytest.fixture()
def k8s_copy(tmp_path: Path) -> Path:
    """A copy of deploy/k8s without secret files."""
    return copy_tree(tmp_path, with_secrets=False)
