#!/usr/bin/env bash
# Runs the benchmarks and prints throughput figures (rows/s). Nothing here asserts a time limit.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-- --warm-up-time 1 --measurement-time 3)
echo "== rowcodec v2 decode (TiDB rows -> typed values)"
cargo bench --locked -p tibinlog --bench rowcodec "${args[@]}"
echo "== rows-event encode (typed values -> WRITE_ROWS events)"
cargo bench --locked -p tibinlog-protocol --bench rows "${args[@]}"
