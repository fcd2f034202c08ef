#!/usr/bin/env bash
# Soak: the crash loop, large. A seeded workload of at least SOAK_TXNS (1,000,000) transactions
# at SOAK_RATE (2,000) per second with every simulator fault (region splits and merges, leader
# moves, store restarts, an aggressive GC), while the server is killed with SIGKILL SOAK_KILLS
# (100) times, spread over the run, and restarted on the same data dir. At the end the binlog
# read from its start equals the truth log and a GTID client that followed across every restart
# received each transaction exactly once. Runs release builds of the server and simulator.
#
#   SOAK_SEED=<seed> bash scripts/soak.sh      # replays a run
#
# Not part of CI (CI runs the same test with 20 kills and a small workload).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tibinlog/target}"
bash scripts/install-deps.sh build
if [ -z "${TIBINLOG_BIN:-}" ]; then
  cargo build --release --locked -p tibinlog --bin tibinlog
  export TIBINLOG_BIN="$CARGO_TARGET_DIR/release/tibinlog"
fi
export TIBINLOG_CRASH_SEED="${SOAK_SEED:-$(date +%s)}"
export TIBINLOG_CRASH_KILLS="${SOAK_KILLS:-100}"
export TIBINLOG_CRASH_RATE="${SOAK_RATE:-2000}"
export TIBINLOG_CRASH_TXNS="${SOAK_TXNS:-1000000}"
export TIBINLOG_CRASH_BINLOG_SIZE="${SOAK_BINLOG_SIZE:-4194304}"
echo "soak: seed $TIBINLOG_CRASH_SEED, $TIBINLOG_CRASH_KILLS kills, $TIBINLOG_CRASH_TXNS transactions at $TIBINLOG_CRASH_RATE/s, server $TIBINLOG_BIN"
start=$(date +%s)
cargo test --locked --workspace --test crash_loop -- --nocapture
echo "soak: passed in $(( $(date +%s) - start )) s (seed $TIBINLOG_CRASH_SEED)"
