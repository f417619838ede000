"""``predops ingest --help`` says, for every source, what PATH it expects, an example
and the -o keys the adapter itself declares; ``files`` without ``--table`` lists them."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from predops.core.schemas import SCHEMAS
from predops.pipelines.cli.main import main
from predops.pipelines.ingest.registry import ADAPTERS, USAGE, option_keys


def test_every_source_has_its_usage() -> None:
    assert set(USAGE) == set(ADAPTERS)


def test_help_lists_each_source_path_example_and_option_keys() -> None:
    out = CliRunner().invoke(main, ["ingest", "--help"], terminal_width=400)
    assert out.exit_code == 0, out.output
    text = out.stdout
    for name, (what, example) in USAGE.items():
        assert f"{name}: {what}" in text, name
        assert f"e.g. {example}" in text, name
    for name in ("prometheus", "kubernetes"):
        keys = option_keys(name)
        assert len(keys) > 5 and f"-o keys: {', '.join(keys)}" in text, name
    assert f"--table: {', '.join(sorted(SCHEMAS))}" in text


def test_files_without_a_table_names_the_tables(tmp_path: Path) -> None:
    f = tmp_path / "x.csv"
    f.write_text("a,b\n1,2\n")
    out = CliRunner().invoke(main, ["--workspace", str(tmp_path / "ws"), "ingest", "files", str(f)])
    assert out.exit_code != 0
    assert "--table; tables: " in out.output and "telemetry" in out.output, out.output
