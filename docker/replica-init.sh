#!/usr/bin/env bash
# Attaches the MySQL 8.0 replica of docker-compose.yml to tibinlog by GTID auto-positioning.
#
# The official mysql image runs the files of /docker-entrypoint-initdb.d once, when it creates
# its data directory, on a temporary server reachable over its local socket as root. This script
# waits until tibinlog answers, then points replication at it; the replication threads start
# again by themselves on every later start of the container.
#
# Environment: TIBINLOG_HOST, TIBINLOG_PORT, TIBINLOG_USER, TIBINLOG_PASSWORD (the source),
# MYSQL_ROOT_PASSWORD (this server), TIBINLOG_WAIT_SECONDS (default 600).
set -euo pipefail

host="${TIBINLOG_HOST:-tibinlog}"
port="${TIBINLOG_PORT:-3306}"
user="${TIBINLOG_USER:-repl}"
password="${TIBINLOG_PASSWORD:-}"
wait_seconds="${TIBINLOG_WAIT_SECONDS:-600}"

# SQL string literal: backslashes and single quotes doubled/escaped.
sql_quote() {
  local s=${1//\\/\\\\}
  printf "'%s'" "${s//\'/\'\'}"
}

echo "replica-init: waiting for tibinlog at ${host}:${port} (up to ${wait_seconds} s)"
deadline=$((SECONDS + wait_seconds))
until MYSQL_PWD="$password" mysql --protocol=TCP -h "$host" -P "$port" -u "$user" \
  --connect-timeout=5 -N -e 'SHOW MASTER STATUS' >/dev/null 2>&1; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    # The replica's I/O thread retries the connection by itself (SOURCE_CONNECT_RETRY), so
    # replication is configured anyway rather than failing the container's first start.
    echo "replica-init: tibinlog did not answer in ${wait_seconds} s; attaching anyway" >&2
    break
  fi
  sleep 2
done

MYSQL_PWD="${MYSQL_ROOT_PASSWORD:-}" mysql --protocol=SOCKET -uroot <<SQL
CHANGE REPLICATION SOURCE TO
  SOURCE_HOST=$(sql_quote "$host"),
  SOURCE_PORT=${port},
  SOURCE_USER=$(sql_quote "$user"),
  SOURCE_PASSWORD=$(sql_quote "$password"),
  SOURCE_AUTO_POSITION=1,
  GET_SOURCE_PUBLIC_KEY=1,
  SOURCE_CONNECT_RETRY=10;
START REPLICA;
SQL
echo "replica-init: replicating from ${host}:${port} with SOURCE_AUTO_POSITION=1"
