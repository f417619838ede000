#!/usr/bin/env bash
# Debian packages the tests use as real components: Prometheus (+ promtool) for the
# ingest integration test, Chromium for the dashboards' browser tests (driven by Playwright;
# never a downloaded browser), PostgreSQL for the MLflow-server-on-PostgreSQL registry test
# (its binaries live in /usr/lib/postgresql/<major>/bin, off PATH; the test starts its own
# throwaway cluster, never the packaged service), kubectl for rendering deploy/k8s with its
# kustomize (Debian's kubernetes-client; the manifests render with its kustomize v2.0.3 as
# with current ones). Installs only what is missing; needs root (or sudo).
set -euo pipefail
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/chromium ] || need+=(chromium)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || need+=(postgresql)
command -v kubectl >/dev/null 2>&1 || need+=(kubernetes-client)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "installing Debian packages: ${need[*]}" >&2
# No service start inside containers without an init system.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
