"""Installing predops claims one top-level import name, ``predops``.

The repository keeps the design card's top-level folders (``core/``, ``pipelines/``,
...); ``pyproject.toml`` maps them under ``predops`` (``core/`` is ``predops.core``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("core", "features", "models", "allocator", "policy", "pipelines", "serving")


def declared_packages() -> set[str]:
    with open(REPO / "pyproject.toml", "rb") as fh:
        return set(tomllib.load(fh)["tool"]["setuptools"]["packages"])


def package_folders() -> set[str]:
    """Every folder of the code that is an import package, as its installed name."""
    found = {"predops"}
    for top in FOLDERS:
        for init in (REPO / top).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO)
            found.add(".".join(("predops", *rel.parts)))
    return found


def test_every_package_folder_is_declared() -> None:
    """A new subpackage missing from pyproject.toml would be left out of the wheel."""
    assert declared_packages() == package_folders()


@pytest.mark.slow
def test_pip_install_claims_only_predops(tmp_path: Path) -> None:
    # from a copy, so that the build's own output never lands in the checkout
    source = tmp_path / "source"
    keep = ("pyproject.toml", "README.md", "__main__.py", *FOLDERS)
    source.mkdir()
    for name in keep:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, source / name)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            target,
            source,
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    top = sorted(
        p.name for p in target.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"
    )
    assert top == ["predops"]
    assert (target / "predops" / "__main__.py").is_file()
    templates = target / "predops" / "serving" / "dashboards" / "templates"
    assert any(templates.glob("*.html")), "the dashboards' templates are package data"
    assert not (target / "predops" / "tests").exists()
    # the installed copy imports and runs on its own (from outside the checkout)
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [
            sys.executable,
            "-P",
            "-c",
            "import predops.core, predops.pipelines.cli.main as m; print(predops.core.__file__)",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert out.stdout.strip().startswith(str(target))
    help_ = subprocess.run(
        [sys.executable, "-P", "-m", "predops", "--help"],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert "predictive operations" in help_.stdout
