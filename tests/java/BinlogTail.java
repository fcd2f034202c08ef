// A replication client built on mysql-binlog-connector-java (the library Debezium and Maxwell
// use), driven by tests/clients_java.rs. It connects in GTID mode, lets the library negotiate
// the CRC32 checksum, asks for heartbeats, and prints one JSON object per line on stdout:
//
//   {"ev":"fde","checksum":"CRC32","server_version":"..."}
//   {"ev":"gtid","gtid":"<uuid>:<gno>"}
//   {"ev":"row","db":..,"table":..,"op":"insert|update|delete","types":{col:type},"before":{col:text}|null,"after":..}
//   {"ev":"ddl","db":..,"sql":..}
//   {"ev":"xid","xid":"<unsigned>"}
//   {"ev":"heartbeat","file":..,"pos":N}
//   {"ev":"done","gtid_set":"<the library's own GTID set>","heartbeats":N}
//   {"ev":"error","what":..}      (then exit status 2)
//
// Values are rendered by column type as MySQL's text protocol shows them (the simulator's truth
// log uses the same rendering): integers with the signedness of the TABLE_MAP metadata, DECIMAL
// with its scale, strings as UTF-8 or 0x + hex when not UTF-8, temporal types with the column's
// fractional digits, ENUM/SET by member names, BIT as 0x + big-endian hex, JSON as text.
//
// Usage: BinlogTail HOST PORT USER PASSWORD SERVER_ID STOP_AFTER_GTIDS
//          [--gtid-set SET] [--heartbeat-ms N] [--keepalive-ping-ms N]
// It stops once STOP_AFTER_GTIDS transactions were committed in this session and, when a
// heartbeat period is set, one heartbeat arrived after the last of them. STOP_AFTER_GTIDS `-`
// reads the count from the first line of stdin, so a test can start tailing before it knows it.

import com.github.shyiko.mysql.binlog.BinaryLogClient;
import com.github.shyiko.mysql.binlog.event.DeleteRowsEventData;
import com.github.shyiko.mysql.binlog.event.Event;
import com.github.shyiko.mysql.binlog.event.EventHeaderV4;
import com.github.shyiko.mysql.binlog.event.EventType;
import com.github.shyiko.mysql.binlog.event.FormatDescriptionEventData;
import com.github.shyiko.mysql.binlog.event.GtidEventData;
import com.github.shyiko.mysql.binlog.event.QueryEventData;
import com.github.shyiko.mysql.binlog.event.TableMapEventData;
import com.github.shyiko.mysql.binlog.event.TableMapEventMetadata;
import com.github.shyiko.mysql.binlog.event.UpdateRowsEventData;
import com.github.shyiko.mysql.binlog.event.WriteRowsEventData;
import com.github.shyiko.mysql.binlog.event.XidEventData;
import com.github.shyiko.mysql.binlog.event.deserialization.EventDeserializer;
import com.github.shyiko.mysql.binlog.event.deserialization.json.JsonBinary;

import java.io.PrintStream;
import java.io.Serializable;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.BitSet;
import java.util.Calendar;
import java.util.GregorianCalendar;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TimeZone;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public class BinlogTail {
    // Column type codes (MySQL enum_field_types).
    static final int TINY = 1, SHORT = 2, LONG = 3, FLOAT = 4, DOUBLE = 5, TIMESTAMP = 7,
        LONGLONG = 8, INT24 = 9, DATE = 10, TIME = 11, DATETIME = 12, YEAR = 13, VARCHAR = 15,
        BIT = 16, TIMESTAMP2 = 17, DATETIME2 = 18, TIME2 = 19, JSON = 245, NEWDECIMAL = 246,
        ENUM = 247, SET = 248, BLOB = 252, VAR_STRING = 253, STRING = 254;

    static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    static final TimeZone UTC = TimeZone.getTimeZone("UTC");

    final Map<Long, TableMapEventData> tables = new HashMap<>();
    long stopAfter;
    final boolean waitHeartbeat;
    long committed;
    long heartbeats;
    boolean inTxn;
    boolean heartbeatAfterLast;
    final CountDownLatch finished = new CountDownLatch(1);
    volatile String failure;

    BinlogTail(long stopAfter, boolean waitHeartbeat) {
        this.stopAfter = stopAfter;
        this.waitHeartbeat = waitHeartbeat;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 6) {
            System.err.println("usage: BinlogTail HOST PORT USER PASSWORD SERVER_ID STOP_AFTER_GTIDS"
                + " [--gtid-set SET] [--heartbeat-ms N] [--keepalive-ping-ms N]");
            System.exit(64);
        }
        String gtidSet = "";
        long heartbeatMs = 0, keepAlivePingMs = 0;
        for (int i = 6; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--gtid-set": gtidSet = args[i + 1]; break;
                case "--heartbeat-ms": heartbeatMs = Long.parseLong(args[i + 1]); break;
                case "--keepalive-ping-ms": keepAlivePingMs = Long.parseLong(args[i + 1]); break;
                default: System.err.println("unknown option " + args[i]); System.exit(64);
            }
        }
        BinaryLogClient client = new BinaryLogClient(args[0], Integer.parseInt(args[1]), args[2], args[3]);
        client.setServerId(Long.parseLong(args[4]));
        // GTID mode: COM_BINLOG_DUMP_GTID from this set (empty = from the first transaction).
        client.setGtidSet(gtidSet);
        client.setHeartbeatInterval(heartbeatMs);
        if (keepAlivePingMs > 0) {
            // Without a heartbeat period the keep-alive thread writes COM_PING packets onto the
            // dump socket and never reads an answer: the server must ignore them.
            client.setKeepAlive(true);
            client.setKeepAliveInterval(keepAlivePingMs);
        } else {
            client.setKeepAlive(false);
        }
        EventDeserializer deserializer = new EventDeserializer();
        deserializer.setCompatibilityMode(
            EventDeserializer.CompatibilityMode.DATE_AND_TIME_AS_LONG_MICRO,
            EventDeserializer.CompatibilityMode.CHAR_AND_BINARY_AS_BYTE_ARRAY,
            EventDeserializer.CompatibilityMode.INVALID_DATE_AND_TIME_AS_MIN_VALUE);
        client.setEventDeserializer(deserializer);

        boolean countFromStdin = args[5].equals("-");
        BinlogTail tail = new BinlogTail(countFromStdin ? Long.MAX_VALUE : Long.parseLong(args[5]),
            heartbeatMs > 0);
        if (countFromStdin) {
            Thread reader = new Thread(() -> {
                try {
                    String line = new java.io.BufferedReader(
                        new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                    if (line == null) {
                        tail.fail("stdin closed before the transaction count arrived");
                    } else {
                        tail.setStopAfter(Long.parseLong(line.trim()));
                    }
                } catch (Exception e) {
                    tail.fail("reading the transaction count: " + e);
                }
            }, "stop-count");
            reader.setDaemon(true);
            reader.start();
        }
        client.registerEventListener(tail::onEvent);
        client.registerLifecycleListener(new BinaryLogClient.AbstractLifecycleListener() {
            @Override
            public void onEventDeserializationFailure(BinaryLogClient c, Exception ex) {
                tail.fail("event deserialization failed: " + ex);
            }

            @Override
            public void onCommunicationFailure(BinaryLogClient c, Exception ex) {
                tail.fail("communication failure: " + ex);
            }

            @Override
            public void onDisconnect(BinaryLogClient c) {
                tail.finished.countDown();
            }
        });
        client.connect(30_000);
        tail.finished.await();
        client.disconnect();
        if (tail.failure != null) {
            OUT.println("{\"ev\":\"error\",\"what\":" + str(tail.failure) + "}");
            System.exit(2);
        }
        OUT.println("{\"ev\":\"done\",\"gtid_set\":" + str(client.getGtidSet()) + ",\"heartbeats\":"
            + tail.heartbeats + "}");
        System.exit(0);
    }

    synchronized void setStopAfter(long n) {
        stopAfter = n;
        maybeFinish();
    }

    synchronized void fail(String what) {
        if (failure == null) {
            failure = what;
        }
        finished.countDown();
    }

    synchronized void onEvent(Event event) {
        try {
            handle(event);
        } catch (Exception e) {
            fail("handling " + event.getHeader() + ": " + e);
        }
    }

    void handle(Event event) throws Exception {
        EventType type = event.getHeader().getEventType();
        switch (type) {
            case FORMAT_DESCRIPTION: {
                FormatDescriptionEventData d = event.getData();
                OUT.println("{\"ev\":\"fde\",\"checksum\":" + str(String.valueOf(d.getChecksumType()))
                    + ",\"server_version\":" + str(d.getServerVersion()) + "}");
                break;
            }
            case GTID: {
                GtidEventData d = event.getData();
                OUT.println("{\"ev\":\"gtid\",\"gtid\":" + str(d.getMySqlGtid().toString()) + "}");
                break;
            }
            case QUERY: {
                QueryEventData d = event.getData();
                String sql = d.getSql();
                if ("BEGIN".equals(sql)) {
                    inTxn = true;
                } else {
                    OUT.println("{\"ev\":\"ddl\",\"db\":" + str(d.getDatabase()) + ",\"sql\":" + str(sql) + "}");
                    commit();
                }
                break;
            }
            case XID: {
                XidEventData d = event.getData();
                OUT.println("{\"ev\":\"xid\",\"xid\":" + str(Long.toUnsignedString(d.getXid())) + "}");
                commit();
                break;
            }
            case TABLE_MAP: {
                TableMapEventData d = event.getData();
                tables.put(d.getTableId(), d);
                break;
            }
            case EXT_WRITE_ROWS:
            case WRITE_ROWS: {
                WriteRowsEventData d = event.getData();
                for (Serializable[] row : d.getRows()) {
                    printRow(d.getTableId(), "insert", null, null, d.getIncludedColumns(), row);
                }
                break;
            }
            case EXT_UPDATE_ROWS:
            case UPDATE_ROWS: {
                UpdateRowsEventData d = event.getData();
                for (Map.Entry<Serializable[], Serializable[]> row : d.getRows()) {
                    printRow(d.getTableId(), "update", d.getIncludedColumnsBeforeUpdate(), row.getKey(),
                        d.getIncludedColumns(), row.getValue());
                }
                break;
            }
            case EXT_DELETE_ROWS:
            case DELETE_ROWS: {
                DeleteRowsEventData d = event.getData();
                for (Serializable[] row : d.getRows()) {
                    printRow(d.getTableId(), "delete", d.getIncludedColumns(), row, null, null);
                }
                break;
            }
            case HEARTBEAT: {
                heartbeats++;
                EventHeaderV4 h = event.getHeader();
                OUT.println("{\"ev\":\"heartbeat\",\"pos\":" + h.getNextPosition() + "}");
                if (committed >= stopAfter && !inTxn) {
                    heartbeatAfterLast = true;
                    maybeFinish();
                }
                break;
            }
            default:
                break;
        }
    }

    void commit() {
        inTxn = false;
        committed++;
        maybeFinish();
    }

    void maybeFinish() {
        if (committed >= stopAfter && (!waitHeartbeat || heartbeatAfterLast)) {
            finished.countDown();
        }
    }

    void printRow(long tableId, String op, BitSet beforeCols, Serializable[] before, BitSet afterCols,
                  Serializable[] after) throws Exception {
        TableMapEventData t = tables.get(tableId);
        if (t == null) {
            throw new IllegalStateException("rows for table id " + tableId + " without a TABLE_MAP");
        }
        Columns cols = new Columns(t);
        StringBuilder sb = new StringBuilder();
        sb.append("{\"ev\":\"row\",\"db\":").append(str(t.getDatabase()))
            .append(",\"table\":").append(str(t.getTable()))
            .append(",\"op\":").append(str(op))
            .append(",\"types\":{");
        for (int i = 0; i < cols.n; i++) {
            if (i > 0) sb.append(',');
            sb.append(str(cols.name(i))).append(':').append(cols.realType[i]);
        }
        sb.append("},\"before\":");
        image(sb, cols, beforeCols, before);
        sb.append(",\"after\":");
        image(sb, cols, afterCols, after);
        sb.append('}');
        OUT.println(sb);
    }

    static void image(StringBuilder sb, Columns cols, BitSet included, Serializable[] row) throws Exception {
        if (row == null) {
            sb.append("null");
            return;
        }
        sb.append('{');
        for (int i = 0, k = 0; i < cols.n; i++) {
            if (!included.get(i)) {
                continue;
            }
            if (k > 0) sb.append(',');
            sb.append(str(cols.name(i))).append(':');
            Serializable v = row[k++];
            sb.append(v == null ? "null" : str(cols.render(i, v)));
        }
        sb.append('}');
    }

    /** A TABLE_MAP's columns: names, real types (ENUM/SET/CHAR behind STRING), metadata. */
    static final class Columns {
        final int n;
        final int[] realType;
        final int[] meta;
        final List<String> names;
        final BitSet unsigned;
        final String[][] members;

        Columns(TableMapEventData t) {
            byte[] types = t.getColumnTypes();
            n = types.length;
            meta = t.getColumnMetadata();
            realType = new int[n];
            TableMapEventMetadata m = t.getEventMetadata();
            names = m != null ? m.getColumnNames() : null;
            unsigned = m != null && m.getSignedness() != null ? m.getSignedness() : new BitSet();
            members = new String[n][];
            List<String[]> enums = m != null ? m.getEnumStrValues() : null;
            List<String[]> sets = m != null ? m.getSetStrValues() : null;
            int e = 0, s = 0;
            for (int i = 0; i < n; i++) {
                int tp = types[i] & 0xFF;
                // STRING hides ENUM and SET in the first metadata byte (log_event_print_value).
                if (tp == STRING && meta[i] >= 256) {
                    int meta0 = meta[i] >> 8;
                    if ((meta0 & 0x30) == 0x30 && (meta0 == ENUM || meta0 == SET)) {
                        tp = meta0;
                    }
                }
                realType[i] = tp;
                if (tp == ENUM) {
                    members[i] = enums != null && e < enums.size() ? enums.get(e) : null;
                    e++;
                } else if (tp == SET) {
                    members[i] = sets != null && s < sets.size() ? sets.get(s) : null;
                    s++;
                }
            }
        }

        String name(int i) {
            return names != null && i < names.size() ? names.get(i) : "@" + (i + 1);
        }

        String render(int i, Serializable v) throws Exception {
            int tp = realType[i];
            boolean uns = unsigned.get(i);
            switch (tp) {
                case TINY: return integer(((Number) v).longValue(), 8, uns);
                case SHORT: return integer(((Number) v).longValue(), 16, uns);
                case INT24: return integer(((Number) v).longValue(), 24, uns);
                case LONG: return integer(((Number) v).longValue(), 32, uns);
                case LONGLONG: {
                    long x = (Long) v;
                    return uns ? Long.toUnsignedString(x) : Long.toString(x);
                }
                case FLOAT: return Float.toString((Float) v);
                case DOUBLE: return Double.toString((Double) v);
                case NEWDECIMAL: return ((BigDecimal) v).toPlainString();
                case YEAR: {
                    int y = (Integer) v;
                    // The zero year is stored as 0 and comes back as 1900 + 0.
                    return y == 1900 ? "0000" : String.format("%04d", y);
                }
                case DATE: return date((Long) v);
                case DATETIME:
                case DATETIME2:
                case TIMESTAMP:
                case TIMESTAMP2: {
                    long micros = (Long) v;
                    if (micros == Long.MIN_VALUE) return "invalid";
                    int fsp = tp == DATETIME2 || tp == TIMESTAMP2 ? meta[i] : 0;
                    return datetime(micros, fsp);
                }
                case TIME:
                case TIME2: {
                    long micros = (Long) v;
                    if (micros == Long.MIN_VALUE) return "invalid";
                    return time(micros, tp == TIME2 ? meta[i] : 0);
                }
                case ENUM: {
                    int idx = (Integer) v;
                    if (idx == 0) return "";
                    String[] m = members[i];
                    return m != null && idx <= m.length ? m[idx - 1] : Integer.toString(idx);
                }
                case SET: {
                    long mask = (Long) v;
                    String[] m = members[i];
                    if (m == null) return Long.toString(mask);
                    StringBuilder sb = new StringBuilder();
                    for (int b = 0; b < m.length && b < 64; b++) {
                        if ((mask & (1L << b)) != 0) {
                            if (sb.length() > 0) sb.append(',');
                            sb.append(m[b]);
                        }
                    }
                    return sb.toString();
                }
                case BIT: {
                    BitSet bits = (BitSet) v;
                    int nbits = (meta[i] >> 8) * 8 + (meta[i] & 0xFF);
                    int width = Math.max(1, (nbits + 7) / 8);
                    byte[] out = new byte[width];
                    for (int b = bits.nextSetBit(0); b >= 0; b = bits.nextSetBit(b + 1)) {
                        out[width - 1 - b / 8] |= (byte) (1 << (b % 8));
                    }
                    return hex(out);
                }
                case JSON: return JsonBinary.parseAsString((byte[]) v);
                case VARCHAR:
                case VAR_STRING:
                case STRING:
                case BLOB: {
                    byte[] b = v instanceof byte[] ? (byte[]) v : v.toString().getBytes(StandardCharsets.UTF_8);
                    return text(b);
                }
                default:
                    return String.valueOf(v);
            }
        }
    }

    static String integer(long v, int bits, boolean uns) {
        if (uns) {
            return Long.toString(v & ((1L << bits) - 1));
        }
        return Long.toString(v);
    }

    /** Calendar fields of epoch microseconds, read back the way the library computed them
     *  (a GMT GregorianCalendar: Julian before 1582-10-15). */
    static GregorianCalendar calendar(long micros) {
        GregorianCalendar c = new GregorianCalendar(UTC);
        c.setTimeInMillis(Math.floorDiv(micros, 1000));
        return c;
    }

    static String date(long micros) {
        if (micros == Long.MIN_VALUE) return "invalid";
        GregorianCalendar c = calendar(micros);
        return String.format("%04d-%02d-%02d", c.get(Calendar.YEAR), c.get(Calendar.MONTH) + 1,
            c.get(Calendar.DAY_OF_MONTH));
    }

    static String datetime(long micros, int fsp) {
        GregorianCalendar c = calendar(micros);
        String s = String.format("%04d-%02d-%02d %02d:%02d:%02d", c.get(Calendar.YEAR),
            c.get(Calendar.MONTH) + 1, c.get(Calendar.DAY_OF_MONTH), c.get(Calendar.HOUR_OF_DAY),
            c.get(Calendar.MINUTE), c.get(Calendar.SECOND));
        return s + fraction(Math.floorMod(micros, 1_000_000L), fsp);
    }

    static String time(long micros, int fsp) {
        long secs = Math.floorDiv(micros, 1_000_000L);
        String s = String.format("%02d:%02d:%02d", secs / 3600, (secs / 60) % 60, secs % 60);
        return s + fraction(Math.floorMod(micros, 1_000_000L), fsp);
    }

    static String fraction(long micros, int fsp) {
        if (fsp <= 0) return "";
        return "." + String.format("%06d", micros).substring(0, Math.min(fsp, 6));
    }

    static String text(byte[] b) {
        try {
            return StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            return hex(b);
        }
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder("0x");
        for (byte x : b) sb.append(String.format("%02X", x & 0xFF));
        return sb.toString();
    }

    /** A JSON string literal. */
    static String str(String s) {
        if (s == null) return "null";
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
            }
        }
        return sb.append('"').toString();
    }
}
