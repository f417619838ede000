#!/usr/bin/env bash
# Build deploy/Dockerfile's image with buildah: no Docker daemon, no user namespaces and no
# OCI runtime needed (`--isolation chroot`), so it runs inside containers and sandboxes.
#
#   deploy/build-image.sh [TAG]          (default localhost/predops:0.1.0; run as root)
#
# The base is python:3.11-slim-bookworm when a registry serves it within a minute; else a
# base built here from Debian packages (mmdebstrap: python3, python3-venv, libgomp1), so
# the image builds wherever Debian's archive and PyPI are reachable. That base trusts the
# build machine's CA bundle, so pip inside the build trusts what the machine trusts.
# BASE_IMAGE=... picks a base and skips both.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-localhost/predops:0.1.0}"
official="docker.io/library/python:3.11-slim-bookworm"
debian_base="localhost/predops-base:bookworm"

need() {
  command -v "$1" >/dev/null || { echo "build-image: $1 not found (apt-get install $1)" >&2; exit 3; }
}
need buildah

base="${BASE_IMAGE:-}"
if [ -z "$base" ]; then
  if buildah inspect --type image "$debian_base" >/dev/null 2>&1; then
    base="$debian_base"
  elif timeout 60 buildah pull --quiet "$official" >/dev/null 2>&1; then
    base="$official"
  else
    echo "build-image: $official cannot be pulled; building $debian_base from Debian packages" >&2
    need mmdebstrap
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,libgomp1,ca-certificates \
      bookworm "$work/rootfs.tar" http://deb.debian.org/debian
    ctr="$(buildah from scratch)"
    buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
    buildah copy --quiet "$ctr" /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt >/dev/null
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$work/pip.conf"
    buildah copy --quiet "$ctr" "$work/pip.conf" /etc/pip.conf >/dev/null
    buildah config --cmd /bin/sh "$ctr"
    buildah commit --quiet --rm "$ctr" "$debian_base" >/dev/null
    base="$debian_base"
  fi
fi

echo "build-image: $tag from $base" >&2
buildah bud --quiet --isolation chroot --layers=false \
  --ignorefile deploy/Dockerfile.dockerignore \
  --build-arg "BASE_IMAGE=$base" \
  -f deploy/Dockerfile -t "$tag" . >/dev/null
echo "$tag"
