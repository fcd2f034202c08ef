#!/usr/bin/env bash
# Runs the benchmarks and prints throughput figures (rows/s). Nothing here asserts a time limit.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(-- --warm-up-time 1 --measurement-time 3)
echo "== rowcodec v2 decode (TiDB rows -> typed values)"
cargo bench --locked -p tibinlog --bench rowcodec "${args[@]}"
echo "== rows-event encode (typed values -> WRITE_ROWS events)"
cargo bench --locked -p tibinlog-protocol --bench rows "${args[@]}"
echo "== sorter (RocksDB write + ordered read + delete; 2 GB transaction peak RSS)"
cargo bench --locked -p tibinlog --bench sorter "${args[@]}"
echo "== simulated workload (row changes/s the simulator generates)"
cargo bench --locked -p tibinlog --bench sim_workload "${args[@]}"
echo "== capture end to end (simulated cluster over gRPC -> typed transactions)"
cargo bench --locked -p tibinlog --bench capture
echo "== capture of wide rows (2 KiB, 20 columns) into fsynced binlog files: MiB/s, peak RSS"
CAPTURE_BENCH_SHAPE=wide CAPTURE_BENCH_SINK=binlog CAPTURE_BENCH_TLS=plain CAPTURE_BENCH_ROWS=500000 \
  cargo bench --locked -p tibinlog --bench capture
echo "== many regions: 10,000 tables, 100,000 regions: initialization, RSS, idle CPU, resolved lag"
cargo bench --locked -p tibinlog --bench regions
echo "== sorter: one 2 GiB transaction streamed (peak RSS printed)"
SORTER_BIG_TXN_MB=2048 cargo bench --locked -p tibinlog --bench sorter
echo "== serving: mariadb-binlog --raw against us and against MariaDB (ratio), 100 concurrent"
echo "   dump clients, commit-to-client latency at 10k rows/s with a 200 ms resolved-ts interval"
cargo bench --locked -p tibinlog --bench serve
echo "== 1,000 tailing dump clients at 10k rows/s (in a child process): commit-to-client latency"
echo "   over all of them, the server's RSS per client"
SERVE_BENCH=tailers cargo bench --locked -p tibinlog --bench serve
echo "== initial scan of a 10,000,000-row table: rows/s, MiB/s, peak RSS"
CAPTURE_BENCH_TLS=plain CAPTURE_BENCH_ROWS=10000000 cargo bench --locked -p tibinlog --bench capture
echo "== the same scan into fsynced binlog files by a server process: rows/s, the server's own peak RSS"
CAPTURE_BENCH_SINK=process CAPTURE_BENCH_TLS=plain CAPTURE_BENCH_ROWS=10000000 \
  cargo bench --locked -p tibinlog --bench capture
echo "== HA: a standby following the owner at 10k rows/s (a real etcd), the standby's client's"
echo "   lag behind the owner's"
SERVE_BENCH=standby cargo bench --locked -p tibinlog --bench serve
echo "== SQL reads: SELECT * of 1,000,000 rows streamed, against MariaDB (ratio, RSS growth), and"
echo "   information_schema.COLUMNS over 10,000 tables"
cargo bench --locked -p tibinlog --bench select
echo "== one 5 GiB transaction from the simulated TiKV to a dump client: every value checked,"
echo "   throughput, the server's peak RSS (its prewrites spill to the sorter's RocksDB)"
HUGE_BYTES="${HUGE_BYTES:-5G}" cargo bench --locked -p tibinlog --bench huge_txn
echo "== logins: the server's password checks, and whole logins per authentication path"
echo "   (native, caching_sha2 fast path, caching_sha2 full authentication with RSA)"
cargo bench --locked -p tibinlog --bench auth
echo "== the figures measured so far, each with the command behind it: docs/performance.md"
