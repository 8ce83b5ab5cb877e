package txmq.agent;

import java.nio.charset.StandardCharsets;

/**
 * One trace event: the columns of trace format v2 (txmq/trace/schema.py COLUMNS, in that order), every one
 * written, null where the event does not use it (the NDJSON the validators read names every column).
 */
final class Row {
    static final String[] COLUMNS = {
        "seq", "ts", "event", "txn", "producer_group", "producer", "half_offset", "prev_half_offset",
        "commitlog_offset", "topic", "queue_id", "queue_offset", "action", "from_check", "result", "check_count",
        "op_offset", "half_offsets", "consumer_group", "body_crc", "attempt", "born_ts", "immunity", "deliver_ms",
        "message_group",
    };
    private final Object[] values = new Object[COLUMNS.length];

    Row(String event) {
        values[2] = event;
    }

    /** Set a column (by name); a name that is not a column is a programming error. */
    Row set(String column, Object value) {
        for (int i = 3; i < COLUMNS.length; i++) {
            if (COLUMNS[i].equals(column)) {
                values[i] = value;
                return this;
            }
        }
        throw new IllegalArgumentException("not a trace column: " + column);
    }

    Object get(String column) {
        for (int i = 0; i < COLUMNS.length; i++) {
            if (COLUMNS[i].equals(column)) {
                return values[i];
            }
        }
        return null;
    }

    /** Each column's name as it leads its value: {@code {"seq": }, then {@code , "ts": } and so on. */
    private static final byte[][] KEYS = new byte[COLUMNS.length][];

    static {
        for (int i = 0; i < COLUMNS.length; i++) {
            KEYS[i] = ((i == 0 ? "{\"" : ", \"") + COLUMNS[i] + "\": ").getBytes(StandardCharsets.US_ASCII);
        }
    }

    void appendJson(Line out, long seq, long ts) {
        out.ascii(KEYS[0]).number(seq).ascii(KEYS[1]).number(ts);
        for (int i = 2; i < COLUMNS.length; i++) {
            out.ascii(KEYS[i]).value(values[i]);
        }
        out.ascii('}');
    }

    static void string(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }
}
