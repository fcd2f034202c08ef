#!/usr/bin/env python3
"""Writes src/server/mysql80_variables.tsv: every system variable of a running MySQL 8.0
server (its name, scope, numeric range and compiled-in default), read through the MariaDB
command-line client over the server's socket. Values that depend on the machine the server
runs on (paths, host name, ports) are left empty.

Usage: scripts/mysql80-variables.py SOCKET > src/server/mysql80_variables.tsv
The server must run with its defaults (no options beyond data dir, socket and paths).
"""
import subprocess
import sys

# Machine- and instance-specific values: never copied.
INSTANCE = {
    "hostname", "port", "report_port", "report_host", "server_uuid", "server_id", "socket",
    "relay_log", "timestamp", "pseudo_thread_id", "rand_seed1", "rand_seed2",
    "gtid_executed", "gtid_purged", "gtid_owned", "mysqlx_port", "mysqlx_socket",
    "admin_port", "version", "version_comment", "version_compile_machine",
    "version_compile_os", "version_compile_zlib", "innodb_buffer_pool_size",
}


def query(sock, sql):
    out = subprocess.run(
        ["mariadb", "-S", sock, "-uroot", "-N", "-B", "-e", sql],
        capture_output=True, text=True)
    return out.returncode, out.stdout


def main():
    sock = sys.argv[1]
    _, rows = query(sock, """
        SELECT i.VARIABLE_NAME, g.VARIABLE_VALUE IS NOT NULL, i.MIN_VALUE, i.MAX_VALUE,
               COALESCE(s.VARIABLE_VALUE, g.VARIABLE_VALUE)
        FROM performance_schema.variables_info i
        LEFT JOIN performance_schema.global_variables g USING (VARIABLE_NAME)
        LEFT JOIN performance_schema.session_variables s USING (VARIABLE_NAME)
        ORDER BY 1""")
    print("# name\tscope\tmin\tmax\tdefault (MySQL 8.0.31; scripts/mysql80-variables.py)")
    for line in rows.splitlines():
        name, has_global, lo, hi, value = (line.split("\t") + [""] * 5)[:5]
        has_session = has_global == "0" or query(sock, f"SELECT @@session.{name}")[0] == 0
        scope = {(True, True): "both", (True, False): "global"}.get(
            (has_global == "1", has_session), "session")
        if name in INSTANCE or "/" in value or value.startswith("."):
            value = ""
        value = value.replace("\\", "\\\\").replace("\t", "\\t")
        print(f"{name}\t{scope}\t{lo}\t{hi}\t{value}")


if __name__ == "__main__":
    main()
