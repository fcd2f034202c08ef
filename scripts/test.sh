#!/usr/bin/env bash
# Runs every test of the project on a fresh machine: installs the real peers the tests talk to,
# checks formatting and lints, then runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh test

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo build (tests)"
cargo test --workspace --locked --no-run

echo "== cargo clippy"
# Clippy's check build runs RocksDB's build script under other unit hashes than the test build,
# which would compile RocksDB's C++ a second time (about as long as the rest of the build on 2
# cores). It only type-checks, so it is pointed at the static library the test build made.
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
lib="$(ls -t "$target"/debug/build/librocksdb-sys-*/out/librocksdb.a 2>/dev/null | head -n 1 || true)"
# The product build without the simulator (`--no-default-features`) is linted too: nothing
# outside the simulator may need it.
if [ -n "$lib" ]; then
  export ROCKSDB_LIB_DIR="$(dirname "$lib")" ROCKSDB_STATIC=1
fi
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy --locked --lib --bin tibinlog --no-default-features -- -D warnings
unset ROCKSDB_LIB_DIR ROCKSDB_STATIC

echo "== cargo test"
# Real-peer tests (MariaDB, Java, Python and Node clients) are part of the suite; CI=true makes a
# missing peer a failure. --no-fail-fast: one run reports every failing suite.
cargo test --workspace --locked --no-fail-fast
