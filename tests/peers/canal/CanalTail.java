// An embedded Canal 1.1.7 instance (CanalServerWithEmbedded + CanalInstanceWithManager, the
// manager-mode instance that needs no Spring files) pointed at a MySQL-protocol source, read
// through the embedded server's client API (subscribe, getWithoutAck, ack) and printed as one
// JSON object per line:
//   {"kind":"begin", "file", "pos", "gtid"}
//   {"kind":"row", "file", "pos", "gtid", "db", "table", "type", "rows":[{"before","after"}]}
//   {"kind":"ddl", "file", "pos", "gtid", "db", "table", "type", "sql"}
//   {"kind":"commit", "file", "pos", "gtid", "xid"}
// Column values are Canal's text; binary and blob values (Canal's ISO-8859-1 text of the bytes)
// are printed as 0x-prefixed hex. Lines are written and flushed before their batch is acked,
// so a stop (SIGTERM) loses nothing that was acked.
//
// Arguments, key=value: host, port, user, password, data (Canal's meta directory: the acked
// cursor lives there and a restart resumes from it), out (the JSON file, appended to),
// file + pos (the start position), timestamp (its time in ms: the table-meta store finds its
// snapshot by it), gtid (a GTID set: GTID mode, started from that set),
// tsdb (a JDBC URL: the table-meta store on, with tsdbUser and tsdbPassword), slaveId.

import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONWriter;
import com.alibaba.otter.canal.instance.manager.CanalInstanceWithManager;
import com.alibaba.otter.canal.instance.manager.model.Canal;
import com.alibaba.otter.canal.instance.manager.model.CanalParameter;
import com.alibaba.otter.canal.protocol.CanalEntry;
import com.alibaba.otter.canal.protocol.ClientIdentity;
import com.alibaba.otter.canal.protocol.Message;
import com.alibaba.otter.canal.server.embedded.CanalServerWithEmbedded;
import com.google.protobuf.ByteString;

public final class CanalTail {
    private static final String DESTINATION = "tibinlog";
    private static volatile boolean running = true;

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String s : argv) {
            int eq = s.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("expected key=value, got " + s);
            }
            a.put(s.substring(0, eq), s.substring(eq + 1));
        }
        CanalParameter p = parameters(a);
        Canal canal = new Canal();
        canal.setId(1L);
        canal.setName(DESTINATION);
        canal.setCanalParameter(p);

        CanalServerWithEmbedded server = CanalServerWithEmbedded.instance();
        server.setCanalInstanceGenerator(destination -> new CanalInstanceWithManager(canal, ".*\\..*"));
        server.start();
        server.start(DESTINATION);
        ClientIdentity client = new ClientIdentity(DESTINATION, (short) 1001, "");
        server.subscribe(client);
        System.err.println("CanalTail: subscribed");

        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            running = false;
            try {
                done.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            server.stop();
            System.err.println("CanalTail: stopped");
        }));
        try (Writer out = new OutputStreamWriter(new FileOutputStream(a.get("out"), true),
            StandardCharsets.UTF_8)) {
            while (running) {
                Message m = server.getWithoutAck(client, 512, 200L, TimeUnit.MILLISECONDS);
                if (m.getId() == -1) {
                    continue;
                }
                for (CanalEntry.Entry e : entries(m)) {
                    String line = line(e);
                    if (line != null) {
                        out.write(line);
                        out.write('\n');
                    }
                }
                out.flush();
                server.ack(client, m.getId());
            }
        } finally {
            done.countDown();
        }
    }

    private static CanalParameter parameters(Map<String, String> a) {
        CanalParameter p = new CanalParameter();
        p.setZkClusters(new ArrayList<>());
        p.setMetaMode(CanalParameter.MetaMode.LOCAL_FILE);
        p.setDataDir(a.get("data"));
        p.setMetaFileFlushPeriod(100);
        p.setIndexMode(CanalParameter.IndexMode.META);
        p.setStorageMode(CanalParameter.StorageMode.MEMORY);
        p.setMemoryStorageBufferSize(32 * 1024);
        p.setSourcingType(CanalParameter.SourcingType.MYSQL);
        InetSocketAddress addr = new InetSocketAddress(a.get("host"), Integer.parseInt(a.get("port")));
        List<InetSocketAddress> addrs = new ArrayList<>();
        addrs.add(addr);
        p.setDbAddresses(addrs);
        p.setDbUsername(a.get("user"));
        p.setDbPassword(a.getOrDefault("password", ""));
        p.setSlaveId(Long.parseLong(a.getOrDefault("slaveId", "1234")));
        p.setDetectingEnable(false);
        p.setConnectionCharset("UTF-8");
        Map<String, Object> pos = new LinkedHashMap<>();
        if (a.containsKey("file")) {
            pos.put("journalName", a.get("file"));
            pos.put("position", Long.parseLong(a.getOrDefault("pos", "4")));
        }
        if (a.containsKey("timestamp")) {
            pos.put("timestamp", Long.parseLong(a.get("timestamp")));
        }
        if (a.containsKey("gtid")) {
            p.setGtidEnable(true);
            pos.put("gtid", a.get("gtid"));
        }
        if (!pos.isEmpty()) {
            List<String> positions = new ArrayList<>();
            positions.add(JSON.toJSONString(pos));
            p.setPositions(positions);
        }
        if (a.containsKey("tsdb")) {
            p.setTsdbEnable(true);
            p.setTsdbJdbcUrl(a.get("tsdb"));
            p.setTsdbJdbcUserName(a.get("tsdbUser"));
            p.setTsdbJdbcPassword(a.getOrDefault("tsdbPassword", ""));
        }
        return p;
    }

    private static List<CanalEntry.Entry> entries(Message m) throws Exception {
        if (!m.isRaw()) {
            return m.getEntries();
        }
        List<CanalEntry.Entry> out = new ArrayList<>();
        for (ByteString b : m.getRawEntries()) {
            out.add(CanalEntry.Entry.parseFrom(b));
        }
        return out;
    }

    private static String line(CanalEntry.Entry e) throws Exception {
        CanalEntry.Header h = e.getHeader();
        Map<String, Object> o = new LinkedHashMap<>();
        switch (e.getEntryType()) {
            case TRANSACTIONBEGIN:
                o.put("kind", "begin");
                break;
            case TRANSACTIONEND:
                o.put("kind", "commit");
                o.put("xid", CanalEntry.TransactionEnd.parseFrom(e.getStoreValue()).getTransactionId());
                break;
            case ROWDATA:
                CanalEntry.RowChange rc = CanalEntry.RowChange.parseFrom(e.getStoreValue());
                o.put("kind", rc.getIsDdl() ? "ddl" : "row");
                o.put("db", h.getSchemaName());
                o.put("table", h.getTableName());
                o.put("type", rc.getEventType().name());
                if (rc.getIsDdl() || rc.getEventType() == CanalEntry.EventType.QUERY) {
                    o.put("sql", rc.getSql());
                } else {
                    List<Object> rows = new ArrayList<>();
                    for (CanalEntry.RowData r : rc.getRowDatasList()) {
                        Map<String, Object> row = new LinkedHashMap<>();
                        row.put("before", image(r.getBeforeColumnsList()));
                        row.put("after", image(r.getAfterColumnsList()));
                        rows.add(row);
                    }
                    o.put("rows", rows);
                }
                break;
            default:
                return null;
        }
        o.put("file", h.getLogfileName());
        o.put("pos", h.getLogfileOffset());
        o.put("gtid", h.getGtid());
        return JSON.toJSONString(o, JSONWriter.Feature.WriteMapNullValue);
    }

    /** A row image: column → value text (null for SQL NULL), or null for no image. */
    private static Map<String, Object> image(List<CanalEntry.Column> cols) {
        if (cols.isEmpty()) {
            return null;
        }
        Map<String, Object> m = new LinkedHashMap<>();
        for (CanalEntry.Column c : cols) {
            Object v = null;
            if (!c.getIsNull()) {
                String t = c.getMysqlType().toLowerCase();
                v = t.contains("blob") || t.contains("binary") ? hex(c.getValue()) : c.getValue();
            }
            m.put(c.getName(), v);
        }
        return m;
    }

    private static String hex(String iso) {
        byte[] b = iso.getBytes(StandardCharsets.ISO_8859_1);
        StringBuilder s = new StringBuilder("0x");
        for (byte x : b) {
            s.append(String.format("%02X", x));
        }
        return s.toString();
    }
}
