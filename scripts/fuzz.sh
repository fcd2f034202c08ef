#!/usr/bin/env bash
# Runs the coverage-guided fuzz targets in fuzz/ (cargo-fuzz, libFuzzer, nightly Rust) for a
# given time each, growing the committed corpora in fuzz/corpus/<target>. Not part of CI.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET…]     (default 600 s, every target)
#   FUZZ_JOBS=2 scripts/fuzz.sh 600                    (targets two at a time)
#   FUZZ_SANITIZER=address scripts/fuzz.sh 600         (default: none; the code is safe Rust)
#
# A crash stops that target and leaves its input in fuzz/artifacts/<target>/; rerun it with
#   cd fuzz && cargo +nightly fuzz run <target> artifacts/<target>/<file>
# After a run, `scripts/fuzz.sh cmin` shrinks the corpora to the inputs that add coverage.
set -euo pipefail
cd "$(dirname "$0")/.."

all=(packet handshake_auth command sql_front upstream)
bash scripts/install-deps.sh build
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# RocksDB's C++ takes most of a build on small machines: reuse the static library of a test
# build when there is one (it is not instrumented either way).
# (the test command's default target directory as well as this shell's).
target="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
lib="$(ls -t "$target"/debug/build/librocksdb-sys-*/out/librocksdb.a \
  "$HOME"/.cache/tibinlog/target/debug/build/librocksdb-sys-*/out/librocksdb.a 2>/dev/null | head -n 1 || true)"
if [ -n "$lib" ]; then
  export ROCKSDB_LIB_DIR="$(dirname "$lib")" ROCKSDB_STATIC=1
fi
sanitizer="${FUZZ_SANITIZER:-none}"
# The instrumented nightly build keeps to fuzz/target, apart from the stable builds.
unset CARGO_TARGET_DIR
cd fuzz

if [ "${1:-}" = "cmin" ]; then
  for t in "${all[@]}"; do
    cargo +nightly fuzz cmin -s "$sanitizer" "$t" "corpus/$t"
  done
  exit 0
fi

secs="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=("${all[@]}")
fi
cargo +nightly fuzz build -s "$sanitizer"
# Run the binaries of this one build (`cargo fuzz run` would rebuild before every target, picking
# up whatever the tree holds by then).
bin="target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
jobs="${FUZZ_JOBS:-1}"
status=0
run() {
  local t="$1"
  mkdir -p "corpus/$t" "artifacts/$t"
  echo "== fuzz $t for ${secs}s"
  "$bin/$t" "corpus/$t" \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=4096 -max_len=65536 \
    -artifact_prefix="artifacts/$t/" -print_final_stats=1 > "artifacts/$t/run.log" 2>&1
}
pids=()
for t in "${targets[@]}"; do
  run "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do
  wait "$p" || status=1
done
for t in "${targets[@]}"; do
  echo "== $t: $(grep -E 'stat::number_of_executed_units|stat::new_units_added' "artifacts/$t/run.log" | tr '\n' ' ')"
  ls "artifacts/$t" | grep -v run.log | sed "s|^|   crash input: artifacts/$t/|" || true
done
exit $status
