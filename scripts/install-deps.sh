#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine. Idempotent and quiet when
# everything is present. The Rust build needs libclang (bindgen generates RocksDB's bindings) and a
# C++ compiler; protoc comes from a crate.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v mariadb-binlog >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || need_apt+=(libclang-dev)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # policy-rc.d keeps the package from starting a system-wide server; tests start their own.
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# python-mysql-replication (a real replication client) in its own virtualenv; the tests find it
# through the same script.
bash "$(dirname "$0")/pyrepl-venv.sh" install
