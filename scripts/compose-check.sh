#!/usr/bin/env bash
# Validates docker-compose.yml and its TLS option (docker-compose.tls.yml) without a Docker
# engine: docker-compose must accept both shapes, and the wiring tests resolve them and check
# that the services agree (addresses, ports, credentials, certificate paths, tibinlog's command
# line parsed by tibinlog's own configuration code).
#
#   scripts/compose-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-compose >/dev/null; then
  bash scripts/install-deps.sh test
fi
for files in "docker-compose.yml" "docker-compose.yml docker-compose.tls.yml"; do
  args=()
  for f in $files; do args+=(-f "$f"); done
  docker-compose "${args[@]}" config -q
  echo "docker-compose accepts: $files"
done
cargo test --locked --test docker_compose -- --test-threads=1
