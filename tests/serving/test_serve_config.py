"""load_serve_config: TOML + environment, validated with errors naming the key, never the
secret."""

from __future__ import annotations

import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from predops.pipelines.workspace.config import ConfigError
from predops.serving.config import load_serve_config, token_digest

DIGEST = token_digest("a-secret-of-enough-length")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "serve.toml"
    path.write_text(text)
    return path


def test_file_and_environment(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""
[server]
port = 9000
protect_reads = true
max_data_age = "10m"

[[tokens]]
name = "alice"
role = "approver"
sha256 = "{DIGEST}"
expires_at = 2030-01-01T00:00:00Z
""",
    )
    env = {"PREDOPS_API_TOKEN": "env-secret-0123456789", "PREDOPS_SERVER__MAX_BATCH": "77"}
    cfg = load_serve_config(path, env)
    assert cfg.port == 9000 and cfg.protect_reads and cfg.max_batch == 77
    assert cfg.max_data_age == timedelta(minutes=10)
    alice, env_token = cfg.tokens
    assert alice.role == "approver" and alice.expires_at == datetime(2030, 1, 1, tzinfo=UTC)
    assert env_token.name == "env" and env_token.role == "operator"
    assert env_token.sha256 == token_digest("env-secret-0123456789")
    assert "env-secret" not in repr(cfg) and "PREDOPS_API_TOKEN" in cfg.origin
    assert load_serve_config(None, {}).tokens == ()


@pytest.mark.parametrize(
    ("text", "env", "needle"),
    [
        ("[server]\nport = 70000\n", {}, "[server] port"),
        ("[server]\nmax_batch = 0\n", {}, "[server] max_batch"),
        ("[server]\nmax_data_age = 5\n", {}, "[server] max_data_age"),
        ("[server]\nprotect_read = true\n", {}, "[server] protect_read: unknown key"),
        ("[sever]\n", {}, "[sever]: unknown section"),
        ('[[tokens]]\nname = "a"\nrole = "root"\nsha256 = "' + DIGEST + '"\n', {}, "role"),
        ('[[tokens]]\nname = "a"\nsha256 = "abc"\n', {}, "[tokens[0]] sha256"),
        (
            '[[tokens]]\nname = "a"\nsha256 = "' + DIGEST + '"\nexpires_at = 2030-01-01\n',
            {},
            "expires_at",
        ),
        ("", {"PREDOPS_API_TOKEN": "short"}, "PREDOPS_API_TOKEN"),
        ("", {"PREDOPS_SERVER__PORT": "eighty"}, "[server] port"),
        ("not toml = = 1", {}, "not valid TOML"),
    ],
)
def test_errors_name_the_key(tmp_path: Path, text: str, env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_serve_config(write(tmp_path, text), env)
    assert needle in str(err.value)
    assert "short" not in str(err.value).replace("PREDOPS", "")


def test_serve_command_refuses_a_bad_config_naming_the_key(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from predops.pipelines.cli.main import main

    bad = write(tmp_path, '[server]\nport = "eighty"\n')
    res = CliRunner().invoke(
        main, ["--workspace", str(tmp_path / "ws"), "serve", "--config", str(bad)]
    )
    assert res.exit_code == 2
    assert "[server] port" in res.output
    res = CliRunner().invoke(main, ["serve", "--hash-token"], input="abc\n")
    assert res.output.strip() == token_digest("abc")


def test_the_demo_token_file_ends_0600_whatever_mode_it_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from predops.pipelines.cli.serve import DEMO_TOKEN_FILE, demo_server_config
    from predops.pipelines.workspace.settings import Settings

    monkeypatch.delenv("PREDOPS_API_TOKEN", raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    old = ws / DEMO_TOKEN_FILE
    old.write_text("an-older-secret\n")
    old.chmod(0o644)  # left by an older version, a copy or a hand edit
    config, path = demo_server_config(Settings(workspace=ws, shared_data=tmp_path))
    assert path == old
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    secret = path.read_text().strip()
    assert secret != "an-older-secret" and config.tokens[0].sha256 == token_digest(secret)
