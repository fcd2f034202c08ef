"""Reads a query's rows through PyMySQL's unbuffered cursor (SSCursor: the rows are read from
the socket while the client iterates, as the server streams them) and prints one JSON line with
what it read: the row count, the sum of the first column, the total length of the second, and
whether the connection still answers afterwards.

Usage: pymysql_stream.py HOST PORT USER PASSWORD QUERY
"""

import json
import sys

import pymysql
import pymysql.cursors


def main():
    host, port, user, password, query = sys.argv[1:6]
    conn = pymysql.connect(
        host=host,
        port=int(port),
        user=user,
        password=password,
        cursorclass=pymysql.cursors.SSCursor,
    )
    rows = total = length = 0
    with conn.cursor() as cur:
        cur.execute(query)
        while True:
            batch = cur.fetchmany(1000)
            if not batch:
                break
            for r in batch:
                rows += 1
                total += r[0]
                length += len(r[1])
        # A cursor closed after a few rows: PyMySQL reads the rest away, and the connection
        # goes on.
        cur.execute(query)
        cur.fetchmany(10)
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        one = cur.fetchall()[0][0]
    conn.close()
    print(json.dumps({"rows": rows, "sum": total, "length": length, "one": one}))


if __name__ == "__main__":
    main()
