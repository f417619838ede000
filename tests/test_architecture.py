"""DESIGN.md's layer rule as a test, independent of import-linter's own run.

Layers (higher may import lower, never the reverse): pipelines / serving (composition
roots, may import each other) > policy > models | allocator (never each other) >
features > core. Below the composition roots nothing reads the environment or the
wall clock. Only ``pipelines/registry.py`` imports MLflow (every Python file of the
repository is checked, tests and benchmarks included).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYER = {
    "core": 0,
    "features": 1,
    "models": 2,
    "allocator": 2,
    "policy": 3,
    "pipelines": 4,
    "serving": 4,
}
ROOTS = {"pipelines", "serving"}
FORBIDDEN_BELOW_ROOTS = {
    ("os", "environ"),
    ("os", "getenv"),
    ("os", "putenv"),
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
}


def imported_packages(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name.split(".")[0]) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def layer_violations(package: str, source: str) -> list[str]:
    """Imports in ``source`` (a module of ``package``) that break the layer rule."""
    found = []
    for line, target in imported_packages(ast.parse(source)):
        if target not in LAYER or target == package:
            continue
        if package in ROOTS and target in ROOTS:
            continue
        if LAYER[target] >= LAYER[package]:
            found.append(f"line {line}: {package} imports {target}")
    return found


def clock_env_reads(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id, node.attr) in FORBIDDEN_BELOW_ROOTS
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


MLFLOW_HOME = "pipelines/registry.py"
"""The one module that talks to MLflow."""


def mlflow_imports(source: str) -> list[str]:
    """Imports of MLflow in ``source``: ``import mlflow...``, ``from mlflow... import``,
    and ``importlib.import_module`` / ``__import__`` of a literal ``"mlflow..."``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args:
            f, arg = node.func, node.args[0]
            called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if called in ("import_module", "__import__") and isinstance(arg, ast.Constant):
                names = [str(arg.value)]
        found += [f"line {node.lineno}: {n}" for n in names if n.split(".")[0] == "mlflow"]
    return found


def repo_python_files() -> list[Path]:
    """Every Python file of the repository (hidden folders such as virtualenvs aside)."""
    return [
        p
        for p in sorted(REPO.rglob("*.py"))
        if not any(part.startswith(".") for part in p.relative_to(REPO).parts)
    ]


@pytest.mark.parametrize("path", repo_python_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_only_the_registry_imports_mlflow(path: Path) -> None:
    rel = path.relative_to(REPO).as_posix()
    if rel != MLFLOW_HOME:
        assert mlflow_imports(path.read_text(encoding="utf-8")) == [], rel


def test_the_registry_is_where_mlflow_is_imported() -> None:
    """Guards the guard: renaming the registry must not silently empty the rule."""
    assert mlflow_imports((REPO / MLFLOW_HOME).read_text(encoding="utf-8"))


def modules() -> list[tuple[str, Path]]:
    return [(pkg, p) for pkg in LAYER for p in sorted((REPO / pkg).rglob("*.py"))]


@pytest.mark.parametrize("package,path", modules(), ids=lambda v: str(v))
def test_module_keeps_layer_rule(package: str, path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    assert layer_violations(package, src) == [], path.relative_to(REPO)
    if package not in ROOTS:
        assert clock_env_reads(src) == [], path.relative_to(REPO)


def test_checker_catches_violations() -> None:
    assert layer_violations("core", "from features import x\n") == ["line 1: core imports features"]
    assert layer_violations("models", "import allocator.snapshot\n") == [
        "line 1: models imports allocator"
    ]
    assert layer_violations("policy", "from serving.app import app\n") != []
    assert layer_violations("pipelines", "from serving import app\nimport core\n") == []
    assert clock_env_reads("import os\nx = os.environ['A']\n") == ["line 2: os.environ"]
    assert clock_env_reads("from datetime import datetime\nt = datetime.now()\n") == [
        "line 2: datetime.now"
    ]
    assert mlflow_imports("import mlflow.pyfunc\n") == ["line 1: mlflow.pyfunc"]
    assert mlflow_imports("x = 1\nfrom mlflow import MlflowClient\n") == ["line 2: mlflow"]
    assert mlflow_imports("import importlib\nm = importlib.import_module('mlflow')\n") == [
        "line 2: mlflow"
    ]
    assert mlflow_imports("import mlflowish\nfrom pipelines import registry\n") == []
