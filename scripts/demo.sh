#!/usr/bin/env bash
# Runs the demo: tibinlog on its embedded simulated TiDB cluster with a live workload. Installs
# only what the build needs (a C++ compiler, libclang, protoc), never the tests' peers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build
# bindgen loads libclang.so (Debian package libclang-dev) to build RocksDB's bindings; without it
# the build would stop in a bindgen backtrace.
if ! dpkg-query -W -f='${db:Status-Status}' libclang-dev 2>/dev/null | grep -qx installed; then
  echo "error: the build needs the Debian package libclang-dev (apt-get install libclang-dev)" >&2
  exit 1
fi
exec cargo run --release --locked -- demo "$@"
