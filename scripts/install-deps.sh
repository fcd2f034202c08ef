#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine. Idempotent and quiet when
# everything is present. The Rust build itself needs nothing from apt: protoc comes from a crate.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v mariadb-binlog >/dev/null 2>&1 || need_apt+=(mariadb-client)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # policy-rc.d keeps the package from starting a system-wide server; tests start their own.
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
