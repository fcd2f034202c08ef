// Debezium's MySQL connector (3.6, in its embedded engine) against tibinlog, driven by
// tests/clients_java.rs. Snapshot mode SNAPSHOT_MODE (default no_data: schema only), file offsets
// and file schema history in WORKDIR, transaction metadata on. One JSON object per line on stdout:
//
//   {"ev":"tx","status":"BEGIN|END","id":"<uuid>:<gno>"}
//   {"ev":"row","gtid":..,"file":..,"pos":..,"row":..,"db":..,"table":..,"op":"insert|update|delete|read","types":{col:kind},"before":{col:text}|null,"after":..}
//
// Snapshot rows (op "read") come before any transaction and have no GTID.
//   {"ev":"done"}  or  {"ev":"error","what":..} (exit status 2)
//
// Values are rendered from their Connect schema (with the MySQL column type Debezium propagates)
// as MySQL's text protocol shows them, so the test can compare them with the simulator's truth
// log; `kind` says how to compare: int, float32, float64, decimal, datetime (always 6 fractional
// digits), time (same), json, bytes, text.
//
// Usage: DebeziumTail HOST PORT USER PASSWORD SERVER_ID WORKDIR [SNAPSHOT_MODE [KEY=VALUE ...]]
// (each KEY=VALUE sets one more connector property; "{WORKDIR}" in a value is replaced). The
// pseudo-property tail.wait.incremental.snapshot=true makes it stop only once an incremental
// snapshot has also completed: it turns on Debezium's sink notifications and prints each as
// {"ev":"notification","aggregate":…,"type":…}.
// The last GTID to wait for is read from the first line of stdin; the program stops after the END
// of that transaction.

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

public class DebeziumTail {
    // JSON lines go to the real stdout; everything else printed on System.out (loggers' console
    // appenders) is sent to stderr.
    static final PrintStream OUT = new PrintStream(new FileOutputStream(FileDescriptor.out), true,
        StandardCharsets.UTF_8);

    // The GTID to stop after and the last transaction that ended; either may come first.
    static String lastGtid;
    static String lastEnded;
    static boolean waitIncremental;
    static boolean incrementalDone;
    static final String NOTIFICATIONS = "tibinlog.notifications";
    static volatile String failure;
    static final CountDownLatch finished = new CountDownLatch(1);

    public static void main(String[] args) throws Exception {
        System.setOut(System.err);
        if (args.length < 6) {
            System.err.println("usage: DebeziumTail HOST PORT USER PASSWORD SERVER_ID WORKDIR [SNAPSHOT_MODE [KEY=VALUE ...]]");
            System.exit(64);
        }
        String work = args[5];
        Properties p = new Properties();
        p.setProperty("name", "tibinlog-test");
        p.setProperty("connector.class", "io.debezium.connector.mysql.MySqlConnector");
        p.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        p.setProperty("offset.storage.file.filename", work + "/offsets.dat");
        p.setProperty("offset.flush.interval.ms", "1000");
        p.setProperty("database.hostname", args[0]);
        p.setProperty("database.port", args[1]);
        p.setProperty("database.user", args[2]);
        p.setProperty("database.password", args[3]);
        p.setProperty("database.server.id", args[4]);
        p.setProperty("topic.prefix", "tibinlog");
        p.setProperty("schema.history.internal", "io.debezium.storage.file.history.FileSchemaHistory");
        p.setProperty("schema.history.internal.file.filename", work + "/schema-history.dat");
        p.setProperty("snapshot.mode", args.length >= 7 ? args[6] : "no_data");
        p.setProperty("include.schema.changes", "false");
        p.setProperty("provide.transaction.metadata", "true");
        p.setProperty("tombstones.on.delete", "false");
        p.setProperty("decimal.handling.mode", "string");
        p.setProperty("bigint.unsigned.handling.mode", "precise");
        p.setProperty("column.propagate.source.type", ".*");
        p.setProperty("connect.timeout.ms", "30000");
        // Fail at once instead of retrying: the test wants the first error.
        p.setProperty("errors.max.retries", "0");
        for (int i = 7; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not KEY=VALUE: " + args[i]);
                System.exit(64);
            }
            String key = args[i].substring(0, eq);
            String value = args[i].substring(eq + 1).replace("{WORKDIR}", work);
            if (key.equals("tail.wait.incremental.snapshot")) {
                waitIncremental = Boolean.parseBoolean(value);
                p.setProperty("notification.enabled.channels", "sink");
                p.setProperty("notification.sink.topic.name", NOTIFICATIONS);
            } else {
                p.setProperty(key, value);
            }
        }

        Thread reader = new Thread(() -> {
            try {
                String line = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)).readLine();
                if (line == null) {
                    fail("stdin closed before the last GTID arrived");
                } else {
                    stopAfter(line.trim());
                }
            } catch (Exception e) {
                fail("reading the last GTID: " + e);
            }
        }, "last-gtid");
        reader.setDaemon(true);
        reader.start();

        DebeziumEngine<RecordChangeEvent<SourceRecord>> engine =
            DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
                .using(p)
                .notifying(DebeziumTail::onRecord)
                .using((success, message, error) -> {
                    if (!success) {
                        fail("engine stopped: " + message + (error != null ? ": " + error : ""));
                    } else {
                        finished.countDown();
                    }
                })
                .build();
        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        finished.await();
        try {
            engine.close();
        } catch (IllegalStateException alreadyStopped) {
            // The engine stopped by itself (the completion callback reported why).
        }
        executor.shutdown();
        executor.awaitTermination(30, TimeUnit.SECONDS);
        if (failure != null) {
            OUT.println("{\"ev\":\"error\",\"what\":" + str(failure) + "}");
            System.exit(2);
        }
        OUT.println("{\"ev\":\"done\"}");
        System.exit(0);
    }

    static synchronized void stopAfter(String gtid) {
        lastGtid = gtid;
        checkDone();
    }

    static synchronized void ended(String gtid) {
        lastEnded = gtid;
        checkDone();
    }

    static synchronized void incrementalCompleted() {
        incrementalDone = true;
        checkDone();
    }

    static synchronized void checkDone() {
        if (lastGtid != null && lastGtid.equals(lastEnded) && (!waitIncremental || incrementalDone)) {
            finished.countDown();
        }
    }

    static synchronized void fail(String what) {
        if (failure == null) {
            failure = what;
        }
        finished.countDown();
    }

    static void onRecord(RecordChangeEvent<SourceRecord> event) {
        try {
            handle(event.record());
        } catch (Exception e) {
            fail("record " + event.record() + ": " + e);
        }
    }

    static void handle(SourceRecord r) throws Exception {
        if (!(r.value() instanceof Struct)) {
            return;
        }
        Struct v = (Struct) r.value();
        String topic = r.topic();
        if (topic.equals(NOTIFICATIONS)) {
            String aggregate = v.getString("aggregate_type");
            String type = v.getString("type");
            OUT.println("{\"ev\":\"notification\",\"aggregate\":" + str(aggregate) + ",\"type\":" + str(type) + "}");
            if ("Incremental Snapshot".equals(aggregate) && "COMPLETED".equals(type)) {
                incrementalCompleted();
            }
            return;
        }
        if (topic.endsWith(".transaction")) {
            String id = v.getString("id");
            String status = v.getString("status");
            OUT.println("{\"ev\":\"tx\",\"status\":" + str(status) + ",\"id\":" + str(id) + "}");
            if ("END".equals(status)) {
                ended(id);
            }
            return;
        }
        if (v.schema().field("op") == null) {
            return;
        }
        String op;
        switch (v.getString("op")) {
            case "c": op = "insert"; break;
            case "u": op = "update"; break;
            case "d": op = "delete"; break;
            case "r": op = "read"; break;
            case "t": op = "truncate"; break;
            default: return;
        }
        Struct source = v.getStruct("source");
        StringBuilder sb = new StringBuilder();
        sb.append("{\"ev\":\"row\",\"gtid\":").append(str(source.getString("gtid")))
            .append(",\"file\":").append(str(source.getString("file")))
            .append(",\"pos\":").append(String.valueOf(source.getInt64("pos")))
            .append(",\"row\":").append(String.valueOf(source.getInt32("row")))
            .append(",\"db\":").append(str(source.getString("db")))
            .append(",\"table\":").append(str(source.getString("table")))
            .append(",\"op\":").append(str(op))
            .append(",\"types\":{");
        Schema rowSchema = v.schema().field("after").schema();
        boolean first = true;
        for (Field f : rowSchema.fields()) {
            if (!first) sb.append(',');
            first = false;
            sb.append(str(f.name())).append(':').append(str(kind(f.schema())));
        }
        sb.append("},\"before\":");
        image(sb, v.getStruct("before"));
        sb.append(",\"after\":");
        image(sb, v.getStruct("after"));
        sb.append('}');
        OUT.println(sb);
    }

    static void image(StringBuilder sb, Struct s) {
        if (s == null) {
            sb.append("null");
            return;
        }
        sb.append('{');
        boolean first = true;
        for (Field f : s.schema().fields()) {
            if (!first) sb.append(',');
            first = false;
            // Struct.get(f) hands back the schema default for a null value; the record holds null.
            Object x = s.getWithoutDefault(f.name());
            sb.append(str(f.name())).append(':').append(x == null ? "null" : str(render(f.schema(), x)));
        }
        sb.append('}');
    }

    static String sourceType(Schema s) {
        Map<String, String> params = s.parameters();
        String t = params != null ? params.get("__debezium.source.column.type") : null;
        return t == null ? "" : t.toUpperCase();
    }

    static String kind(Schema s) {
        String name = s.name() == null ? "" : s.name();
        String src = sourceType(s);
        switch (name) {
            case "io.debezium.time.Timestamp":
            case "io.debezium.time.MicroTimestamp":
            case "io.debezium.time.NanoTimestamp":
            case "io.debezium.time.ZonedTimestamp":
                return "datetime";
            case "io.debezium.time.Time":
            case "io.debezium.time.MicroTime":
            case "io.debezium.time.NanoTime":
                return "time";
            case "io.debezium.data.Json":
                return "json";
            case "org.apache.kafka.connect.data.Decimal":
                return src.startsWith("DECIMAL") ? "decimal" : "int";
            default:
                break;
        }
        if (src.startsWith("DECIMAL")) return "decimal";
        switch (s.type()) {
            case INT8: case INT16: case INT32: case INT64:
                return name.startsWith("io.debezium.time.") ? "text" : "int";
            case FLOAT32: return "float32";
            case FLOAT64: return "float64";
            case BYTES: return name.equals("io.debezium.data.Bits") ? "text" : "bytes";
            default: return "text";
        }
    }

    static String render(Schema s, Object x) {
        String name = s.name() == null ? "" : s.name();
        switch (name) {
            case "io.debezium.time.Date":
                return LocalDate.ofEpochDay(((Number) x).longValue()).toString();
            case "io.debezium.time.Timestamp":
                return datetime(Math.multiplyExact(((Number) x).longValue(), 1000L));
            case "io.debezium.time.MicroTimestamp":
                return datetime(((Number) x).longValue());
            case "io.debezium.time.NanoTimestamp":
                return datetime(Math.floorDiv(((Number) x).longValue(), 1000L));
            case "io.debezium.time.ZonedTimestamp": {
                OffsetDateTime t = OffsetDateTime.parse((String) x).withOffsetSameInstant(ZoneOffset.UTC);
                return datetime(t.toEpochSecond() * 1_000_000L + t.getNano() / 1000);
            }
            case "io.debezium.time.Time":
                return time(((Number) x).longValue() * 1000L);
            case "io.debezium.time.MicroTime":
                return time(((Number) x).longValue());
            case "io.debezium.time.NanoTime":
                return time(((Number) x).longValue() / 1000L);
            case "io.debezium.time.Year":
                return String.format("%04d", ((Number) x).intValue());
            case "io.debezium.data.Bits": {
                byte[] le = bytes(x);
                int nbits = Integer.parseInt(s.parameters().getOrDefault("length", "1"));
                int width = Math.max(1, (nbits + 7) / 8);
                byte[] be = new byte[width];
                for (int i = 0; i < width && i < le.length; i++) be[width - 1 - i] = le[i];
                return hex(be);
            }
            default:
                break;
        }
        if (x instanceof BigDecimal) return ((BigDecimal) x).toPlainString();
        if (x instanceof Boolean) {
            boolean b = (Boolean) x;
            return sourceType(s).startsWith("BIT") ? (b ? "0x01" : "0x00") : (b ? "1" : "0");
        }
        if (x instanceof ByteBuffer || x instanceof byte[]) return text(bytes(x));
        return x.toString();
    }

    static byte[] bytes(Object x) {
        if (x instanceof byte[]) return (byte[]) x;
        ByteBuffer b = ((ByteBuffer) x).duplicate();
        byte[] out = new byte[b.remaining()];
        b.get(out);
        return out;
    }

    static String datetime(long micros) {
        LocalDateTime t = LocalDateTime.ofEpochSecond(Math.floorDiv(micros, 1_000_000L),
            (int) Math.floorMod(micros, 1_000_000L) * 1000, ZoneOffset.UTC);
        return String.format("%04d-%02d-%02d %02d:%02d:%02d.%06d", t.getYear(), t.getMonthValue(),
            t.getDayOfMonth(), t.getHour(), t.getMinute(), t.getSecond(), t.getNano() / 1000);
    }

    static String time(long micros) {
        String sign = micros < 0 ? "-" : "";
        long m = Math.abs(micros);
        long secs = m / 1_000_000L;
        return String.format("%s%02d:%02d:%02d.%06d", sign, secs / 3600, (secs / 60) % 60, secs % 60,
            m % 1_000_000L);
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
