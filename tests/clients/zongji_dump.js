// Streams a tibinlog server's binlog from the start with @vlasky/zongji (a Node.js binlog
// client on the mysql2 driver) and prints one JSON line per row event:
//   {"gtid", "db", "table", "op", "types": {col: MySQL type code},
//    "rows": [{"before": {col: value}|null, "after": {col: value}|null}]}
// Values: null, {"n": text} for numbers, {"s": text} for strings, {"hex": hex} for bytes,
// {"other": text} for anything else (dates, JSON documents, geometry). After `--txns`
// transactions (XID events) it prints {"end": {"xids": n}} and exits.
//
// Usage: node zongji_dump.js --dir <zongji install dir> --host H --port P --user U
//        [--password W] --txns N
'use strict';

const path = require('path');
const { pathToFileURL } = require('url');

function args() {
  const out = { password: '' };
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i += 2) {
    out[a[i].replace(/^--/, '')] = a[i + 1];
  }
  return out;
}

function value(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number' || typeof v === 'bigint') return { n: String(v) };
  if (typeof v === 'string') return { s: v };
  if (Buffer.isBuffer(v)) return { hex: v.toString('hex') };
  if (v instanceof Date) return { other: v.toISOString() };
  return { other: JSON.stringify(v) };
}

function image(row) {
  if (!row) return null;
  const out = {};
  for (const [k, v] of Object.entries(row)) out[k] = value(v);
  return out;
}

async function main() {
  const opt = args();
  const entry = path.join(opt.dir, 'node_modules', '@vlasky', 'zongji', 'index.js');
  const { default: ZongJi } = await import(pathToFileURL(entry).href);
  const want = Number(opt.txns);
  const zongji = new ZongJi({
    host: opt.host,
    port: Number(opt.port),
    user: opt.user,
    password: opt.password,
  });
  let xids = 0;
  let done = false;
  const finish = (code) => {
    if (done) return;
    done = true;
    zongji.stop();
    // Writes to a pipe are asynchronous: exit once everything before this line is flushed.
    process.stdout.write(JSON.stringify({ end: { xids } }) + '\n', () => process.exit(code));
  };
  zongji.on('error', (err) => {
    process.stderr.write(`zongji error: ${err && err.stack ? err.stack : err}\n`);
    process.exit(2);
  });
  zongji.on('binlog', (evt) => {
    const type = evt.getTypeName();
    if (type === 'Xid') {
      xids += 1;
      if (xids >= want) finish(0);
      return;
    }
    const op = { WriteRows: 'insert', UpdateRows: 'update', DeleteRows: 'delete' }[type];
    if (!op) return;
    const table = evt.tableMap[evt.tableId];
    const types = {};
    const tm = evt.tableMap[evt.tableId];
    (tm.columns || []).forEach((c) => { types[c.name] = c.type; });
    const rows = evt.rows.map((r) => {
      if (op === 'update') return { before: image(r.before), after: image(r.after) };
      if (op === 'insert') return { before: null, after: image(r) };
      return { before: image(r), after: null };
    });
    process.stdout.write(JSON.stringify({
      gtid: evt.gtid === undefined ? null : String(evt.gtid),
      db: table.parentSchema,
      table: table.tableName,
      op,
      types,
      rows,
    }) + '\n');
  });
  zongji.start({
    serverId: 4321,
    filename: 'binlog.000001',
    position: 4,
    includeEvents: ['tablemap', 'writerows', 'updaterows', 'deleterows', 'xid'],
  });
}

main().catch((err) => {
  process.stderr.write(`${err && err.stack ? err.stack : err}\n`);
  process.exit(2);
});
