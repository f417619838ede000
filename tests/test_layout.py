"""The repository's layout rules: long modules say why, benchmarks shadow nothing, design
notes live in ``docs/`` and package ``__init__`` docstrings stay short.

Each rule is a small checker over source text, tested on its own examples below, and then
run over the repository."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "features", "models", "allocator", "policy", "pipelines", "serving")
MAX_LINES = 500
MAX_INIT_DOC_LINES = 40
DESIGN_DOCS = ("allocator.md", "policy.md", "demand.md", "whatif.md")


def package_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def benchmark_files() -> list[Path]:
    return sorted((REPO / "benchmarks").glob("*.py"))


def _id(path: Path) -> str:
    return str(path.relative_to(REPO))


def first_paragraph(src: str) -> str:
    """The module docstring up to its first blank line ("" without a docstring)."""
    doc = ast.get_docstring(ast.parse(src), clean=True) or ""
    return doc.split("\n\n", 1)[0]


def says_why_it_is_long(src: str) -> bool:
    """A module over MAX_LINES lines says why in its docstring's first paragraph."""
    if len(src.splitlines()) <= MAX_LINES:
        return True
    return any(line.startswith("Over 500 lines:") for line in first_paragraph(src).splitlines())


def sys_path_changes(src: str) -> list[str]:
    """Lines that assign to ``sys.path`` (``sys.path = ...``, ``sys.path[:] = ...``, ``+=``)
    or change it in place (``sys.path.insert(...)``, ``.append``, ``.extend``, ...)."""

    def is_sys_path(node: ast.AST) -> bool:
        while isinstance(node, ast.Subscript):
            node = node.value
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "path"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )

    found = []
    for node in ast.walk(ast.parse(src)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"insert", "append", "extend", "remove", "pop", "clear"}
        ):
            targets = [node.func.value]
        if any(is_sys_path(t) for t in targets):
            found.append(f"line {node.lineno}: sys.path changed")
    return found


def docstring_lines(src: str) -> int:
    doc = ast.get_docstring(ast.parse(src), clean=False)
    return len(doc.splitlines()) if doc else 0


def test_checkers_catch_what_they_check() -> None:
    long_body = "x = 1\n" * MAX_LINES
    assert says_why_it_is_long('"""Short."""\n' + "x = 1\n" * 10)
    assert not says_why_it_is_long('"""Long and silent."""\n' + long_body)
    assert not says_why_it_is_long('"""Long.\n\nOver 500 lines: too late."""\n' + long_body)
    assert says_why_it_is_long('"""Long.\nOver 500 lines: one class."""\n' + long_body)
    assert sys_path_changes("import sys\nsys.path[:] = []\n") == ["line 2: sys.path changed"]
    assert sys_path_changes("import sys\nsys.path = ['a']\n")
    assert sys_path_changes("import sys\nsys.path += ['a']\n")
    assert sys_path_changes("import sys\nsys.path.insert(0, 'a')\n")
    assert sys_path_changes("import sys\nsys.path.append('a')\n")
    assert sys_path_changes("import sys\nprint(sys.path)\nx = list(sys.path)\n") == []
    assert docstring_lines('"""a\nb\nc\n"""\n') == 3
    assert docstring_lines("x = 1\n") == 0


@pytest.mark.parametrize("path", package_files(), ids=_id)
def test_a_module_over_500_lines_says_why(path: Path) -> None:
    assert says_why_it_is_long(path.read_text(encoding="utf-8")), (
        f"{_id(path)} has over {MAX_LINES} lines: split it, or start a line of its module "
        "docstring's first paragraph with 'Over 500 lines:' and say why it stays one module"
    )


def test_no_benchmark_is_named_like_a_package() -> None:
    stems = {p.stem for p in benchmark_files()}
    assert stems, "no benchmarks found"
    assert sorted(stems & set(PACKAGES)) == []


@pytest.mark.parametrize("path", benchmark_files(), ids=_id)
def test_benchmarks_leave_sys_path_alone(path: Path) -> None:
    assert sys_path_changes(path.read_text(encoding="utf-8")) == [], _id(path)


@pytest.mark.parametrize("name", DESIGN_DOCS)
def test_design_docs_live_in_docs(name: str) -> None:
    assert (REPO / "docs" / name).is_file()


@pytest.mark.parametrize("path", [p for p in package_files() if p.name == "__init__.py"], ids=_id)
def test_package_init_docstrings_are_short(path: Path) -> None:
    n = docstring_lines(path.read_text(encoding="utf-8"))
    assert n <= MAX_INIT_DOC_LINES, (
        f"{_id(path)}: a {n}-line package docstring; design notes and experiment "
        "journals belong in docs/"
    )


def test_no_design_note_is_left_in_a_package() -> None:
    left = [_id(p) for pkg in PACKAGES for p in (REPO / pkg).rglob("*.md")]
    assert left == [], "design notes belong in docs/"
