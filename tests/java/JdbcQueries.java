import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;

/**
 * Runs statements through MySQL Connector/J on one connection and prints every answer as one
 * JSON line, so a test can check what a JDBC client of the server reads.
 *
 * <p>Arguments: JDBC URL, user, password. Standard input: one request per line, its fields
 * separated by TAB: the mode, the statement, then the parameters of a prepared statement.
 *
 * <ul>
 *   <li>{@code q}: {@code Statement.execute}, every result of it (multi-statements included);
 *   <li>{@code p}: a {@code PreparedStatement}; a parameter written {@code #123} is bound with
 *       {@code setLong}, any other with {@code setString};
 *   <li>{@code s}: a streamed result ({@code setFetchSize(Integer.MIN_VALUE)}), as Maxwell's
 *       bootstrap and Debezium's large-table snapshot read;
 *   <li>{@code c}: a prepared statement read with a fetch size of 7 (a server cursor and
 *       COM_STMT_FETCH when the URL has {@code useCursorFetch=true});
 *   <li>{@code v}: {@code Connection.isValid} (COM_PING).
 * </ul>
 *
 * <p>Output per request: {@code {"sql":…,"results":[{"cols":[…],"types":[…],"rows":[[…]]} or
 * {"update":n}]}}, or {@code {"sql":…,"error":code,"state":…,"msg":…}}. Values are
 * {@code getString}, binary columns {@code "x:"} and the hex of {@code getBytes}; NULL is null.
 */
public class JdbcQueries {
    public static void main(String[] args) throws Exception {
        try (Connection conn = DriverManager.getConnection(args[0], args[1], args[2])) {
            BufferedReader in =
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                StringBuilder out = new StringBuilder("{\"sql\":");
                str(out, f[1]);
                StringBuilder answer = new StringBuilder();
                try {
                    answer(conn, f, answer);
                    out.append(answer);
                } catch (SQLException e) {
                    out.append(",\"error\":").append(e.getErrorCode()).append(",\"state\":");
                    str(out, e.getSQLState());
                    out.append(",\"msg\":");
                    str(out, e.getMessage());
                    // Where the driver failed, for a failure message.
                    Throwable root = e;
                    while (root.getCause() != null) root = root.getCause();
                    StringBuilder trace = new StringBuilder(root.toString());
                    StackTraceElement[] st = root.getStackTrace();
                    for (int i = 0; i < Math.min(st.length, 12); i++) {
                        trace.append("\n  at ").append(st[i]);
                    }
                    out.append(",\"trace\":");
                    str(out, trace.toString());
                }
                out.append('}');
                System.out.println(out);
                System.out.flush();
            }
        }
    }

    static void answer(Connection conn, String[] f, StringBuilder out) throws SQLException {
        String mode = f[0];
        String sql = f[1];
        out.append(",\"results\":[");
        switch (mode) {
            case "q": {
                try (Statement st = conn.createStatement()) {
                    boolean rs = st.execute(sql);
                    boolean first = true;
                    while (true) {
                        if (rs) {
                            if (!first) out.append(',');
                            try (ResultSet r = st.getResultSet()) {
                                rows(r, out);
                            }
                        } else {
                            int n = st.getUpdateCount();
                            if (n == -1) break;
                            if (!first) out.append(',');
                            out.append("{\"update\":").append(n).append('}');
                        }
                        first = false;
                        rs = st.getMoreResults();
                    }
                }
                break;
            }
            case "p":
            case "c": {
                try (PreparedStatement st = conn.prepareStatement(sql)) {
                    for (int i = 2; i < f.length; i++) {
                        String p = f[i];
                        if (p.startsWith("#")) {
                            st.setLong(i - 1, Long.parseLong(p.substring(1)));
                        } else {
                            st.setString(i - 1, p);
                        }
                    }
                    if (mode.equals("c")) {
                        st.setFetchSize(7);
                    }
                    try (ResultSet r = st.executeQuery()) {
                        rows(r, out);
                    }
                }
                break;
            }
            case "s": {
                try (Statement st =
                        conn.createStatement(
                                ResultSet.TYPE_FORWARD_ONLY, ResultSet.CONCUR_READ_ONLY)) {
                    st.setFetchSize(Integer.MIN_VALUE);
                    try (ResultSet r = st.executeQuery(sql)) {
                        rows(r, out);
                    }
                }
                break;
            }
            case "v":
                out.append("{\"valid\":").append(conn.isValid(5)).append('}');
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + mode);
        }
        out.append(']');
    }

    static void rows(ResultSet r, StringBuilder out) throws SQLException {
        ResultSetMetaData md = r.getMetaData();
        int n = md.getColumnCount();
        out.append("{\"cols\":[");
        for (int i = 1; i <= n; i++) {
            if (i > 1) out.append(',');
            str(out, md.getColumnLabel(i));
        }
        out.append("],\"types\":[");
        for (int i = 1; i <= n; i++) {
            if (i > 1) out.append(',');
            str(out, md.getColumnTypeName(i));
        }
        out.append("],\"rows\":[");
        boolean firstRow = true;
        while (r.next()) {
            if (!firstRow) out.append(',');
            firstRow = false;
            out.append('[');
            for (int i = 1; i <= n; i++) {
                if (i > 1) out.append(',');
                if (binary(md.getColumnType(i))) {
                    byte[] b = r.getBytes(i);
                    if (b == null) {
                        out.append("null");
                    } else {
                        StringBuilder h = new StringBuilder("x:");
                        for (byte x : b) h.append(String.format("%02x", x & 0xff));
                        str(out, h.toString());
                    }
                } else {
                    str(out, r.getString(i));
                }
            }
            out.append(']');
        }
        out.append("]}");
    }

    static boolean binary(int type) {
        return type == Types.BINARY
                || type == Types.VARBINARY
                || type == Types.LONGVARBINARY
                || type == Types.BLOB
                || type == Types.BIT;
    }

    static void str(StringBuilder out, String s) {
        if (s == null) {
            out.append("null");
            return;
        }
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    out.append("\\\"");
                    break;
                case '\\':
                    out.append("\\\\");
                    break;
                case '\n':
                    out.append("\\n");
                    break;
                case '\r':
                    out.append("\\r");
                    break;
                case '\t':
                    out.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
            }
        }
        out.append('"');
    }
}
