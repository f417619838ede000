"""The image builds (deploy/build-image.sh: buildah, chroot isolation) and runs: ``predops
--help`` as the image's non-root user, ``predops serve`` answers /healthz and says why it
is not ready on an empty workspace, and nothing is written outside /tmp and the
workspace (the manifests' read-only root file system). Skipped where no builder exists.

An image whose build inputs are unchanged is reused (tagged by their hash), so a second
run costs the smoke test only."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.deploy.k8s import DEPLOY

REPO = DEPLOY.parent
PACKAGES = ("core", "features", "models", "allocator", "policy", "pipelines", "serving")
WRITABLE = ("/tmp", "/workspace")
SKIPPED_TREES = ("/proc", "/sys", "/dev", "/run")

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def build_inputs_hash() -> str:
    files = [
        DEPLOY / "Dockerfile",
        DEPLOY / "Dockerfile.dockerignore",
        DEPLOY / "build-image.sh",
        *(REPO / n for n in ("pyproject.toml", "README.md", "__main__.py")),
    ]
    for pkg in PACKAGES:
        files += [
            p for p in (REPO / pkg).rglob("*") if p.is_file() and "__pycache__" not in p.parts
        ]
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def buildah(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["buildah", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("buildah") is None:
        pytest.skip("no OCI builder: buildah is not installed (apt-get install buildah mmdebstrap)")
    if os.geteuid() != 0:
        pytest.skip("buildah without root needs user namespaces; run the image test as root")
    tag = f"localhost/predops:test-{build_inputs_hash()}"
    if buildah("inspect", "--type", "image", tag).returncode != 0:
        done = subprocess.run(
            [str(DEPLOY / "build-image.sh"), tag],
            capture_output=True,
            text=True,
            timeout=2400,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-4000:]
        # Older test images (1.7 GB each) go: only the current inputs' image is kept.
        listed = buildah("images", "--format", "{{.Name}}:{{.Tag}}").stdout.split()
        for old in listed:
            if old.startswith("localhost/predops:test-") and old != tag:
                buildah("rmi", old)
    return tag


@pytest.fixture()
def container(image: str) -> Iterator[str]:
    made = buildah("from", "--quiet", image)
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip()
    try:
        yield name
    finally:
        buildah("umount", name)
        buildah("rm", name)


def run_in(ctr: str, *command: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``command`` in the container. buildah 1.28's chroot isolation now and then loses
    the output of a process that exits at once (1 run in 30 of `id -u` on a loaded
    machine): a successful run that printed nothing is run again, twice at most."""
    for _ in range(3):
        done = buildah("run", "--isolation", "chroot", ctr, "--", *command, timeout=timeout)
        if done.returncode != 0 or done.stdout:
            break
    return done


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def written_outside(root: Path, since: float) -> list[str]:
    """Files and folders below ``root`` changed after ``since``, outside the writable
    mounts and the kernel's own trees."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel = "/" + str(Path(dirpath).relative_to(root)).lstrip(".")
        if rel.startswith(WRITABLE + SKIPPED_TREES):
            dirnames.clear()
            continue
        for n in dirnames + filenames:
            path, shown = Path(dirpath) / n, f"{rel.rstrip('/')}/{n}"
            if shown in WRITABLE + SKIPPED_TREES or path.is_symlink():
                continue
            if path.stat().st_mtime > since:
                out.append(shown)
    return out


@pytest.mark.timeout(2700)
def test_the_image_runs_predops_as_its_non_root_user(container: str) -> None:
    who = run_in(container, "id", "-u")
    assert who.returncode == 0 and who.stdout.strip() == "10001", who.stderr
    helped = run_in(container, "predops", "--help")
    assert helped.returncode == 0, helped.stderr
    assert all(cmd in helped.stdout for cmd in ("serve", "schedule", "apply"))
    mlflow = run_in(container, "mlflow", "server", "--help")  # the production overlay's
    assert mlflow.returncode == 0, mlflow.stderr
    psycopg = run_in(container, "python", "-c", "import psycopg2; print(psycopg2.__version__)")
    assert psycopg.returncode == 0 and psycopg.stdout.startswith("2.9"), psycopg.stderr


@pytest.mark.timeout(2700)
def test_the_server_answers_healthz_and_writes_only_where_pods_may(container: str) -> None:
    mounted = buildah("mount", container)
    assert mounted.returncode == 0, mounted.stderr
    root = Path(mounted.stdout.strip())
    since = time.time()
    time.sleep(1)  # mtimes of this second are not "after"
    port = free_port()
    serve = ("predops", "serve", "--host", "127.0.0.1", "--port", str(port))
    server = subprocess.Popen(
        ["buildah", "run", "--isolation", "chroot", container, "--", *serve],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        status = 0
        while time.monotonic() < deadline and server.poll() is None:
            try:
                status, body = get(f"http://127.0.0.1:{port}/healthz")
                break
            except OSError:
                time.sleep(1)
        assert status == 200 and json.loads(body) == {"status": "ok"}
        status, body = get(f"http://127.0.0.1:{port}/readyz")
        ready = json.loads(body)
        assert status == 200 and ready["ready"] is True and ready["models_ready"] is False
        assert "node_failure: no model loaded" in ready["problems"]
    finally:
        server.terminate()  # buildah passes SIGTERM on; uvicorn stops at once
        server.communicate(timeout=60)
    assert written_outside(root, since) == []
    assert (root / "workspace" / "mlflow.db").exists()  # the embedded MLflow store
