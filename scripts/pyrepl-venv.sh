#!/usr/bin/env bash
# The Python virtualenv holding python-mysql-replication (PyPI `mysql-replication`, with PyMySQL)
# for the real-client tests. This file is the one place that knows where it lives:
#
#   scripts/pyrepl-venv.sh path      prints the venv directory (the tests call this)
#   scripts/pyrepl-venv.sh install   creates it and installs the pinned packages (idempotent)
#
# Location: $TIBINLOG_PYREPL_VENV, else a per-user data directory
# (${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/pyrepl-venv). Nothing is installed globally.
set -euo pipefail

# Pinned versions; change them here only (the venv is rebuilt when they change).
PINS=("mysql-replication==1.0.17" "PyMySQL==1.1.1")

venv_dir() {
  if [ -n "${TIBINLOG_PYREPL_VENV:-}" ]; then
    echo "$TIBINLOG_PYREPL_VENV"
  else
    echo "${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/pyrepl-venv"
  fi
}

install() {
  local dir stamp want
  dir="$(venv_dir)"
  stamp="$dir/.tibinlog-pins"
  want="${PINS[*]}"
  if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
    && "$dir/bin/python" -c 'import pymysqlreplication, pymysql' >/dev/null 2>&1; then
    return 0
  fi
  # Debian's Python (packages python3 and python3-venv, which scripts/install-deps.sh installs).
  local py="${TIBINLOG_PYTHON:-/usr/bin/python3}"
  if ! "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "error: $py cannot make a virtualenv: install the Debian packages python3 python3-venv" >&2
    exit 1
  fi
  echo "installing: ${PINS[*]} into $dir"
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input "${PINS[@]}"
  echo "$want" >"$stamp"
}

case "${1:-}" in
  path) venv_dir ;;
  install) install ;;
  *)
    echo "usage: $0 path|install" >&2
    exit 2
    ;;
esac
