"""DESIGN.md's layer rule as a test, independent of import-linter's own run.

Rooms, top to bottom (a room may import rooms below it, never above; rooms on one line
never import each other):

    pipelines.cli                          the predops command; launches the other faces
    pipelines.scheduler | serving          faces
    pipelines.whatif                       the closed-loop simulator
    pipelines.jobs                         use cases every face calls
    pipelines.actuators | pipelines.synthetic
    pipelines.ingest
    pipelines.workspace                    what every face reads and writes
    policy > models | allocator > features > core     the pure layers

Besides: every internal import names ``predops.`` (never a bare top-level folder), no
module is looked up by name through ``importlib`` / ``__import__``, below the
composition roots nothing reads the environment or the wall clock, only
``pipelines/workspace/registry.py`` imports MLflow (every Python file of the repository
is checked, tests and benchmarks included), and no module sits loose at the root of
``pipelines/``.
"""

from __future__ import annotations

import ast
import graphlib
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("core", "features", "models", "allocator", "policy", "pipelines", "serving")
RANK = {
    "predops.core": 0,
    "predops.features": 1,
    "predops.models": 2,
    "predops.allocator": 2,
    "predops.policy": 3,
    "predops.pipelines.workspace": 4,
    "predops.pipelines.ingest": 5,
    "predops.pipelines.actuators": 6,
    "predops.pipelines.synthetic": 6,
    "predops.pipelines.jobs": 7,
    "predops.pipelines.whatif": 8,
    "predops.pipelines.scheduler": 9,
    "predops.serving": 9,
    "predops.pipelines.cli": 10,
}
PURE = {"predops.core", "predops.features", "predops.models", "predops.allocator", "predops.policy"}
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
MLFLOW_HOME = "pipelines/workspace/registry.py"
"""The one module that talks to MLflow."""


def room_of(module: str) -> str | None:
    """The room (a key of :data:`RANK`) a dotted module name belongs to."""
    best = None
    for room in RANK:
        if (module == room or module.startswith(room + ".")) and (
            best is None or len(room) > len(best)
        ):
            best = room
    return best


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(("predops", *parts))


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.extend((node.lineno, f"{node.module}.{a.name}") for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            out.append((node.lineno, "." * node.level + (node.module or "")))
    return out


def layer_violations(module: str, source: str) -> list[str]:
    """Imports in ``source`` (the module ``module``) that break the room rule."""
    here = room_of(module) or module  # the bare ``predops.pipelines`` package
    found = []
    for line, target in imported_modules(ast.parse(source)):
        if target.startswith("."):
            found.append(f"line {line}: relative import {target}")
            continue
        if target.split(".")[0] in FOLDERS:
            found.append(f"line {line}: {target} is not under predops.")
            continue
        there = room_of(target)
        if there is None or there == here:
            continue
        if RANK[there] >= RANK.get(here, -1):
            found.append(f"line {line}: {here} imports {there}")
    return found


def name_lookups(source: str) -> list[str]:
    """Modules looked up by name: ``importlib.import_module(x)``, ``__import__(x)``,
    ``importlib.util.find_spec(x)`` of anything but a literal outside predops."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        f = node.func
        called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if called not in ("import_module", "__import__", "find_spec"):
            continue
        arg = node.args[0]
        literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        if not literal:
            found.append(f"line {node.lineno}: {called} of a computed name")
        elif str(arg.value).split(".")[0] in ("predops", *FOLDERS):
            found.append(f"line {node.lineno}: {called}({arg.value!r})")
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
    """Every Python file of the repository: tracked, or new and not ignored (so neither
    virtualenvs nor build output nor workspaces)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return sorted(REPO / p for p in listed if (REPO / p).is_file())


def code_files() -> list[Path]:
    return [p for top in FOLDERS for p in sorted((REPO / top).rglob("*.py"))]


def _id(p: Path) -> str:
    return str(p.relative_to(REPO))


@pytest.mark.parametrize("path", repo_python_files(), ids=_id)
def test_only_the_registry_imports_mlflow(path: Path) -> None:
    rel = path.relative_to(REPO).as_posix()
    if rel != MLFLOW_HOME:
        assert mlflow_imports(path.read_text(encoding="utf-8")) == [], rel


def test_the_registry_is_where_mlflow_is_imported() -> None:
    """Guards the guard: renaming the registry must not silently empty the rule."""
    assert mlflow_imports((REPO / MLFLOW_HOME).read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", code_files(), ids=_id)
def test_module_keeps_layer_rule(path: Path) -> None:
    src = path.read_text(encoding="utf-8")
    module = module_name(path)
    assert layer_violations(module, src) == [], _id(path)
    assert name_lookups(src) == [], _id(path)
    if room_of(module) in PURE:
        assert clock_env_reads(src) == [], _id(path)


@pytest.mark.parametrize("path", repo_python_files(), ids=_id)
def test_no_module_is_looked_up_by_name(path: Path) -> None:
    """Tests and benchmarks too: a lookup by name hides a dependency from every tool."""
    if path.name == "test_architecture.py":
        return  # the checker's own examples below
    assert name_lookups(path.read_text(encoding="utf-8")) == [], _id(path)


SERVER_MAY_USE = ("predops.pipelines.jobs", "predops.pipelines.workspace")


def server_reaches_past_jobs(source: str) -> list[str]:
    """Imports of ``predops.pipelines`` by the server outside the jobs and the workspace."""
    return [
        f"line {line}: {target}"
        for line, target in imported_modules(ast.parse(source))
        if target.startswith("predops.pipelines.")
        and not target.startswith(tuple(m + "." for m in SERVER_MAY_USE))
    ]


@pytest.mark.parametrize("path", sorted((REPO / "serving").rglob("*.py")), ids=_id)
def test_the_server_uses_only_jobs_and_the_workspace(path: Path) -> None:
    assert server_reaches_past_jobs(path.read_text(encoding="utf-8")) == [], _id(path)


def test_every_code_file_is_in_a_room() -> None:
    rooms = {module_name(p): room_of(module_name(p)) for p in code_files()}
    loose = sorted(m for m, r in rooms.items() if r is None and m != "predops.pipelines")
    assert loose == []


def test_nothing_is_loose_at_the_root_of_pipelines() -> None:
    loose = sorted(p.name for p in (REPO / "pipelines").glob("*.py") if p.name != "__init__.py")
    assert loose == []


def import_cycle(sources: dict[str, str]) -> list[str]:
    """A cycle of module imports among ``sources`` (module -> its source), or []."""
    graph: dict[str, set[str]] = {}
    for module, src in sources.items():
        targets = set()
        for _, target in imported_modules(ast.parse(src)):
            while target and target not in sources:  # ``from a.b import c``: c may be a name
                target = target.rpartition(".")[0]
            if target and target != module:
                targets.add(target)
        graph[module] = targets
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_no_module_imports_itself_back() -> None:
    """No import loop between modules (a room's modules included): the scheduler's
    runner and steps once imported each other."""
    sources = {module_name(p): p.read_text(encoding="utf-8") for p in code_files()}
    assert import_cycle(sources) == []


def test_checker_catches_violations() -> None:
    assert layer_violations("predops.core.x", "from predops.features import x\n") == [
        "line 1: predops.core imports predops.features"
    ]
    assert layer_violations("predops.models.a", "import predops.allocator.snapshot\n") == [
        "line 1: predops.models imports predops.allocator"
    ]
    assert layer_violations("predops.policy.a", "from predops.serving.app import app\n") != []
    assert layer_violations("predops.core.a", "from features import x\n") == [
        "line 1: features.x is not under predops."
    ]
    assert layer_violations("predops.core.a", "from . import x\n") == ["line 1: relative import ."]
    # faces: the server and the scheduler never import each other or the CLI
    assert layer_violations(
        "predops.serving.routes.plans", "from predops.pipelines.cli.plan import x\n"
    ) == ["line 1: predops.serving imports predops.pipelines.cli"]
    assert layer_violations(
        "predops.pipelines.scheduler.steps", "from predops.serving import app\n"
    ) == ["line 1: predops.pipelines.scheduler imports predops.serving"]
    assert layer_violations(
        "predops.serving.app", "import predops.pipelines.scheduler.runner\n"
    ) == ["line 1: predops.serving imports predops.pipelines.scheduler"]
    # jobs never import a face; the workspace never imports a job
    assert layer_violations("predops.pipelines.jobs.plan", "import predops.pipelines.cli.x\n")
    assert layer_violations("predops.pipelines.workspace.a", "import predops.pipelines.jobs.b\n")
    assert (
        layer_violations(
            "predops.pipelines.cli.main",
            "from predops.serving import app\nimport predops.core\n"
            "import predops.pipelines.cli.support\n",
        )
        == []
    )
    assert import_cycle({"a.x": "from a.y import f\n", "a.y": "def f(): from a.x import g\n"})
    assert import_cycle({"a.x": "from a.y import f\n", "a.y": "import b\n"}) == []
    assert server_reaches_past_jobs("from predops.pipelines.actuators.kube import connect\n")
    assert server_reaches_past_jobs("from predops.pipelines.jobs.plan import apply\n") == []
    assert name_lookups("import importlib\nm = importlib.import_module('predops.pipelines.jobs')\n")
    assert name_lookups("m = __import__('pipelines.failure_jobs')\n")
    assert name_lookups("import importlib\nm = importlib.import_module(NAME)\n")
    assert name_lookups("import importlib\nm = importlib.import_module('kubernetes')\n") == []
    assert clock_env_reads("import os\nx = os.environ['A']\n") == ["line 2: os.environ"]
    assert clock_env_reads("from datetime import datetime\nt = datetime.now()\n") == [
        "line 2: datetime.now"
    ]
    assert mlflow_imports("import mlflow.pyfunc\n") == ["line 1: mlflow.pyfunc"]
    assert mlflow_imports("x = 1\nfrom mlflow import MlflowClient\n") == ["line 2: mlflow"]
    assert mlflow_imports("import importlib\nm = importlib.import_module('mlflow')\n") == [
        "line 2: mlflow"
    ]
    assert mlflow_imports("import mlflowish\nfrom predops.pipelines import registry\n") == []
