#!/usr/bin/env bash
# The Node.js package directory holding @vlasky/zongji (a Node.js binlog client, on the mysql2
# driver) for the real-client test. This file is the one place that knows where it lives:
#
#   scripts/zongji-deps.sh path      prints the package directory (the tests call this)
#   scripts/zongji-deps.sh install   installs the pinned packages there (idempotent)
#
# Location: $TIBINLOG_ZONGJI_DIR, else a per-user data directory
# (${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/zongji). Nothing is installed globally. The
# tests run tests/clients/zongji_dump.js with NODE_PATH=<dir>/node_modules.
set -euo pipefail

# Pinned versions; change them here only (the directory is rebuilt when they change).
PINS=("@vlasky/zongji@0.9.0" "mysql2@3.22.5")

pkg_dir() {
  if [ -n "${TIBINLOG_ZONGJI_DIR:-}" ]; then
    echo "$TIBINLOG_ZONGJI_DIR"
  else
    echo "${XDG_DATA_HOME:-$HOME/.local/share}/tibinlog/zongji"
  fi
}

install() {
  local dir stamp want
  dir="$(pkg_dir)"
  stamp="$dir/.tibinlog-pins"
  want="${PINS[*]}"
  if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] \
    && [ -f "$dir/node_modules/@vlasky/zongji/package.json" ] \
    && command -v node >/dev/null 2>&1; then
    return 0
  fi
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "error: node and npm are needed: install the Debian packages nodejs npm" >&2
    exit 1
  fi
  echo "installing: ${PINS[*]} into $dir"
  rm -rf "$dir"
  mkdir -p "$dir"
  echo '{"name":"tibinlog-zongji-client","private":true}' >"$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --save-exact "${PINS[@]}" >/dev/null
  echo "$want" >"$stamp"
}

case "${1:-}" in
  path) pkg_dir ;;
  install) install ;;
  *)
    echo "usage: $0 path|install" >&2
    exit 2
    ;;
esac
