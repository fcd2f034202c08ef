"""Reads a tibinlog server's binlog with python-mysql-replication and prints what it saw.

Used by tests/clients_python.rs. One JSON line per transaction, in stream order:

    {"gtid": "<uuid>:<gno>", "file": F, "pos": P, "xid": N|null, "ddl": TEXT|null, "db": DB|null,
     "rows": [{"db": D, "table": T, "op": "insert"|"update"|"delete",
               "before": {col: TEXT|null}|null, "after": {...}|null}]}

then one last line with where the read stopped, to resume from:

    {"end": {"file": F, "pos": P, "gtid_set": S, "txns": N, "eof": true|false}}

`file`/`pos` are the stream's position after the transaction (python's `log_file`/`log_pos`);
`gtid_set` is the start set plus every GTID seen, kept with the library's own GtidSet.

Start: `--file F --pos P` (COM_BINLOG_DUMP with resume_stream, so the position is honoured) or
`--gtid-set S` (COM_BINLOG_DUMP_GTID via `auto_position`). The dump is non-blocking (the
library's default): it ends at the server's EOF packet, or after `--max-txns` transactions.

Values are printed in MySQL's text form, as the simulator's truth log has them
(src/tidb/text.rs). Where the library hands back something else, it is turned into that text
here, from the library's own decoded value and the TABLE_MAP column metadata it parsed (never
from our knowledge of the table):

* integers: `str()`; signedness comes from the SIGNEDNESS optional metadata the library reads.
* YEAR: the library returns `byte + 1900`, so the zero year comes back as 1900 (not a valid
  YEAR value otherwise): 1900 -> `0000`, else four digits.
* FLOAT: the library widens the 4 bytes to a Python float; printed as the shortest decimal
  that reads back as the same single-precision value, in MySQL 8's form (`1.5`, `-2`, `1e20`).
* DOUBLE: the shortest round-trip digits (Python's repr), in MySQL 8's form (`100`, not
  `100.0`; exponent form `1e20` / `1.5e-7` outside [1e-4, 1e15)).
* DECIMAL: `decimal.Decimal` printed in fixed notation; the library builds it with exactly the
  column's scale digits, which is what MySQL shows.
* CHAR/VARCHAR/TEXT: the library decodes with the column's charset (COLUMN_CHARSET metadata)
  and returns `str`. BINARY/VARBINARY/BLOB: it returns `bytes` (charset `binary`); printed as
  UTF-8 when the bytes are valid UTF-8, else `0x` + upper-case hex (`mysql --binary-as-hex`).
* DATE/DATETIME/TIMESTAMP: `datetime` objects printed `YYYY-MM-DD[ HH:MM:SS[.f]]` with exactly
  the column's fsp digits (fsp from the TABLE_MAP metadata). TIMESTAMP is decoded by the
  library with `utcfromtimestamp`, i.e. in UTC, the server's time zone.
* TIME: a `timedelta` printed `[-]HH:MM:SS[.f]` (hours at least two digits). The library
  mis-decodes a negative TIME with a non-zero fraction: MySQL stores it with a borrow (integer
  part -(s+1), fraction 1-f, see `my_time_packed_to_binary`), and the library adds the two
  parts without undoing the borrow, so -00:00:00.01 comes back as -00:00:00.99 and
  -12:34:56.78 as -12:34:56.22. The mapping is one-to-one: a negative value whose fraction is
  non-zero is turned back as -(whole seconds + (1 - fraction)). Zero fractions and positive
  values are decoded right and left alone. (The encoding itself is checked against
  mariadb-binlog in tests/binlog_encoder_mariadb.rs.)
* ENUM: the member name the library looked up in the ENUM_STR_VALUE metadata (index 0 is '').
* SET: the library returns a Python `set` (unordered) of names, or None for the empty set with
  the row's none_sources saying "empty set": printed as the members joined with `,` in
  definition order (SET_STR_VALUE metadata), `''` for the empty set. A None whose none_source
  is anything but NULL is reported as an error, never as NULL.
* BIT(n): the library returns a string of n '0'/'1' characters; printed as `0x` + upper-case
  hex of the (n+7)/8 big-endian bytes.
* JSON: the library returns None for the JSON literal `null` document, the same None as an SQL
  NULL; its JSON reader is wrapped so that a top-level JSON null comes back as a marker
  instead (the library's decoding is otherwise untouched).
  The library parses binary JSON into Python values (object keys and strings as
  bytes); printed in MySQL's JSON text form: `{"k": v, ...}` with keys ordered by length then
  bytes, `[a, b]`, `, ` and `: ` separators, doubles with `.0` when integral and exponent form
  outside [1e-15, 1e15), strings with JSON escapes.
"""

import argparse
import datetime
import decimal
import json
import struct
import sys

from pymysqlreplication import BinLogStreamReader, packet
from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.event import GtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.gtid import Gtid, GtidSet
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)


class ValueError_(Exception):
    """A value the library decoded into something that has no MySQL text form."""


JSON_NULL = object()
"""What a JSON column holding the JSON literal null decodes to (see the module doc)."""

_read_binary_json = packet.BinLogPacketWrapper.read_binary_json


def _read_binary_json_keep_null(self, size, is_partial):
    v = _read_binary_json(self, size, is_partial)
    return JSON_NULL if v is None and not is_partial else v


packet.BinLogPacketWrapper.read_binary_json = _read_binary_json_keep_null


# ---------------------------------------------------------------------------------------------
# Floats in MySQL 8's text form (the shortest round-trip digits).


def _to_f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _shortest_f32(x):
    """Decimal with the fewest significant digits that reads back as the f32 `x`."""
    for p in range(1, 10):
        s = "%.*e" % (p - 1, x)
        if _to_f32(float(s)) == x:
            return decimal.Decimal(s)
    return decimal.Decimal(repr(x))


def _plain(d):
    """`d` without exponent and without trailing zeros (`100`, `0.0001`, `-0`)."""
    t = d.normalize()
    return format(t, "f")


def _exp(d):
    """`d` as `<mantissa>e<exp>` with the shortest mantissa (`1e20`, `-1.5e-7`)."""
    sign, digits, exponent = d.normalize().as_tuple()
    digits = "".join(map(str, digits)).rstrip("0") or "0"
    sci = len(d.normalize().as_tuple().digits) - 1 + exponent
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return ("-" if sign else "") + mant + "e" + str(sci)


def float_text(x, single):
    if x != x or x in (float("inf"), float("-inf")):
        return repr(x)
    d = _shortest_f32(x) if single else decimal.Decimal(repr(x))
    a = abs(x)
    if a != 0.0 and not (1e-4 <= a < 1e15):
        return _exp(d)
    return _plain(d)


def json_double_text(x):
    if x != x or x in (float("inf"), float("-inf")):
        return "null"
    d = decimal.Decimal(repr(x))
    a = abs(x)
    if a != 0.0 and not (1e-15 <= a < 1e15):
        return _exp(d)
    s = _plain(d)
    return s if "." in s else s + ".0"


# ---------------------------------------------------------------------------------------------
# JSON text (MySQL's form).


def _json_string(s):
    out = ['"']
    for c in s:
        o = ord(c)
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\r":
            out.append("\\r")
        elif c == "\t":
            out.append("\\t")
        elif c == "\b":
            out.append("\\b")
        elif c == "\f":
            out.append("\\f")
        elif o < 0x20:
            out.append("\\u%04x" % o)
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def _text(b):
    return b.decode("utf-8") if isinstance(b, (bytes, bytearray)) else str(b)


def json_text(v):
    if v is None or v is JSON_NULL:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return json_double_text(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray, str)):
        return _json_string(_text(v))
    if isinstance(v, list):
        return "[" + ", ".join(json_text(x) for x in v) + "]"
    if isinstance(v, dict):
        items = sorted(
            ((_text(k).encode("utf-8"), x) for k, x in v.items()),
            key=lambda kv: (len(kv[0]), kv[0]),
        )
        return (
            "{"
            + ", ".join(_json_string(k.decode("utf-8")) + ": " + json_text(x) for k, x in items)
            + "}"
        )
    if isinstance(v, datetime.datetime):
        return '"' + _datetime(v, 6) + '"'
    if isinstance(v, datetime.date):
        return '"' + v.isoformat() + '"'
    if isinstance(v, datetime.timedelta):
        return '"' + _duration(v, 6) + '"'
    raise ValueError_("JSON value of unexpected Python type %r" % type(v))


# ---------------------------------------------------------------------------------------------
# Column values.


def _frac(micros, fsp):
    if fsp <= 0:
        return ""
    return "." + ("%06d" % micros)[:fsp]


def _datetime(v, fsp):
    return "%04d-%02d-%02d %02d:%02d:%02d%s" % (
        v.year,
        v.month,
        v.day,
        v.hour,
        v.minute,
        v.second,
        _frac(v.microsecond, fsp),
    )


def _duration(td, fsp):
    us = td // datetime.timedelta(microseconds=1)
    neg = us < 0
    us = abs(us)
    secs, micros = divmod(us, 1_000_000)
    h, rest = divmod(secs, 3600)
    m, s = divmod(rest, 60)
    return "%s%02d:%02d:%02d%s" % ("-" if neg and us else "", h, m, s, _frac(micros, fsp))


def _undo_time_borrow(td):
    """The TIME MySQL stored, from the library's decoding of it (see the module doc)."""
    us = td // datetime.timedelta(microseconds=1)
    if us >= 0 or us % 1_000_000 == 0:
        return td
    whole, frac = divmod(-us, 1_000_000)
    return -datetime.timedelta(microseconds=whole * 1_000_000 + (1_000_000 - frac))


def _bytes_text(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + b.hex().upper()


def value_text(col, v, none_source):
    """The MySQL text of one decoded value; None for SQL NULL."""
    t = col.type
    if v is None:
        if t == FIELD_TYPE.SET and none_source == NONE_SOURCE.EMPTY_SET:
            return ""
        if none_source not in (None, NONE_SOURCE.NULL):
            raise ValueError_(
                "column %s: library returned None (%s), not NULL" % (col.name, none_source)
            )
        return None
    if t in (
        FIELD_TYPE.TINY,
        FIELD_TYPE.SHORT,
        FIELD_TYPE.INT24,
        FIELD_TYPE.LONG,
        FIELD_TYPE.LONGLONG,
    ):
        return str(v)
    if t == FIELD_TYPE.YEAR:
        return "0000" if v == 1900 else "%04d" % v
    if t == FIELD_TYPE.FLOAT:
        return float_text(v, True)
    if t == FIELD_TYPE.DOUBLE:
        return float_text(v, False)
    if t == FIELD_TYPE.NEWDECIMAL:
        return format(v, "f")
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB, FIELD_TYPE.GEOMETRY):
        return _bytes_text(v) if isinstance(v, (bytes, bytearray)) else v
    if t == FIELD_TYPE.DATE:
        return "%04d-%02d-%02d" % (v.year, v.month, v.day)
    if t in (FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2):
        return _datetime(v, col.fsp)
    if t in (FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP):
        return _datetime(v, 0)
    if t == FIELD_TYPE.TIME2:
        return _duration(_undo_time_borrow(v), col.fsp)
    if t == FIELD_TYPE.TIME:
        return _duration(v, 0)
    if t == FIELD_TYPE.ENUM:
        return v
    if t == FIELD_TYPE.SET:
        return ",".join(m for m in col.set_values if m in v)
    if t == FIELD_TYPE.BIT:
        width = (col.bits + 7) // 8
        return "0x" + int(v, 2).to_bytes(width, "big").hex().upper()
    if t == FIELD_TYPE.JSON:
        return json_text(v)
    raise ValueError_("column %s: unexpected type %d" % (col.name, t))


def image(ev, values, none_sources):
    out = {}
    for col in ev.columns:
        out[col.name] = value_text(col, values[col.name], none_sources.get(col.name))
    return out


# ---------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--user", default="root")
    ap.add_argument("--password", default="")
    ap.add_argument("--server-id", type=int, default=4242)
    ap.add_argument("--file")
    ap.add_argument("--pos", type=int)
    ap.add_argument("--gtid-set")
    ap.add_argument("--max-txns", type=int, default=0, help="0 = read to the end")
    args = ap.parse_args()
    if (args.gtid_set is None) == (args.file is None):
        ap.error("give --file/--pos or --gtid-set")

    settings = {
        "host": args.host,
        "port": args.port,
        "user": args.user,
        "passwd": args.password,
        "connect_timeout": 10,
        "read_timeout": 120,
    }
    kw = {}
    if args.gtid_set is not None:
        kw["auto_position"] = args.gtid_set
        seen = GtidSet(args.gtid_set)
    else:
        kw.update(log_file=args.file, log_pos=args.pos, resume_stream=True)
        seen = GtidSet(None)
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=args.server_id,
        blocking=False,
        only_events=[
            GtidEvent,
            QueryEvent,
            XidEvent,
            RotateEvent,
            WriteRowsEvent,
            UpdateRowsEvent,
            DeleteRowsEvent,
        ],
        enable_logging=False,
        **kw,
    )
    out = sys.stdout
    txn = None
    count = 0
    eof = True
    try:
        for ev in stream:
            if isinstance(ev, GtidEvent):
                if txn is not None:
                    raise ValueError_("GTID %s inside transaction %s" % (ev.gtid, txn["gtid"]))
                txn = {"gtid": ev.gtid, "xid": None, "ddl": None, "db": None, "rows": []}
            elif isinstance(ev, QueryEvent):
                q = ev.query
                if txn is None:
                    raise ValueError_("QUERY %r outside a transaction" % q)
                if q == "BEGIN":
                    continue
                txn["ddl"] = q
                txn["db"] = _text(ev.schema)
            elif isinstance(ev, XidEvent):
                if txn is None:
                    raise ValueError_("XID outside a transaction")
                txn["xid"] = ev.xid
            elif isinstance(ev, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                if txn is None:
                    raise ValueError_("rows outside a transaction")
                for r in ev.rows:
                    if isinstance(ev, WriteRowsEvent):
                        op, before = "insert", None
                        after = image(ev, r["values"], r["none_sources"])
                    elif isinstance(ev, DeleteRowsEvent):
                        op, after = "delete", None
                        before = image(ev, r["values"], r["none_sources"])
                    else:
                        op = "update"
                        before = image(ev, r["before_values"], r["before_none_sources"])
                        after = image(ev, r["after_values"], r["after_none_sources"])
                    txn["rows"].append(
                        {
                            "db": ev.schema,
                            "table": ev.table,
                            "op": op,
                            "before": before,
                            "after": after,
                        }
                    )
            if txn is not None and (txn["ddl"] is not None or txn["xid"] is not None):
                gtid = Gtid(txn["gtid"])
                if gtid in seen:
                    raise ValueError_("GTID %s is in the start set or came twice" % txn["gtid"])
                seen.merge_gtid(gtid)
                txn["file"] = stream.log_file
                txn["pos"] = stream.log_pos
                out.write(json.dumps(txn, ensure_ascii=False) + "\n")
                txn = None
                count += 1
                if args.max_txns and count >= args.max_txns:
                    eof = False
                    break
        if txn is not None:
            raise ValueError_("the stream ended inside transaction %s" % txn["gtid"])
        end = {
            "file": stream.log_file,
            "pos": stream.log_pos,
            "gtid_set": str(seen),
            "txns": count,
            "eof": eof,
        }
        out.write(json.dumps({"end": end}) + "\n")
    finally:
        stream.close()


if __name__ == "__main__":
    main()
