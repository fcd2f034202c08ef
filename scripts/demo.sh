#!/usr/bin/env bash
# Runs the demo: tibinlog on its embedded simulated TiDB cluster with a live workload.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
exec cargo run --release --locked -- demo "$@"
