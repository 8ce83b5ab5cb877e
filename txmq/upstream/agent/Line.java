package txmq.agent;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Collection;

/**
 * One or more trace lines being encoded straight to UTF-8 bytes, reused under {@link Trace#LOCK}: an event
 * costs no StringBuilder, no String and no byte[] of its own (it is encoded inside CommitLog's
 * putMessageLock, so every allocation and copy there delays the broker's puts). Numbers are written
 * digit by digit and the ASCII strings upstream's values are (offsets, ids, topics, addresses) byte by
 * byte; anything else goes through {@link Row#string}, the one JSON escaping rule.
 */
final class Line {
    private byte[] bytes = new byte[4096];
    private int size;

    void reset() {
        size = 0;
    }

    byte[] bytes() {
        return bytes;
    }

    int size() {
        return size;
    }

    private void room(int more) {
        if (size + more > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + more));
        }
    }

    Line ascii(byte[] text) {
        room(text.length);
        System.arraycopy(text, 0, bytes, size, text.length);
        size += text.length;
        return this;
    }

    Line ascii(char c) {
        room(1);
        bytes[size++] = (byte) c;
        return this;
    }

    Line number(long value) {
        if (value == Long.MIN_VALUE) {
            return ascii(Long.toString(value).getBytes(StandardCharsets.US_ASCII));
        }
        room(20);
        if (value < 0) {
            bytes[size++] = '-';
            value = -value;
        }
        int digits = 1;
        for (long rest = value / 10; rest > 0; rest /= 10) {
            digits++;
        }
        for (int at = size + digits - 1; at >= size; at--) {
            bytes[at] = (byte) ('0' + value % 10);
            value /= 10;
        }
        size += digits;
        return this;
    }

    /** A JSON string: printable ASCII without quote or backslash is copied as is, the rest escaped by Row. */
    Line string(String text) {
        int n = text.length();
        room(n + 2);
        int start = size;
        bytes[size++] = '"';
        for (int i = 0; i < n; i++) {
            char c = text.charAt(i);
            if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') {
                size = start;
                StringBuilder escaped = new StringBuilder(n + 16);
                Row.string(escaped, text);
                return ascii(escaped.toString().getBytes(StandardCharsets.UTF_8));
            }
            bytes[size++] = (byte) c;
        }
        bytes[size++] = '"';
        return this;
    }

    /** A column's value as trace format v2 writes it (Python's json.dumps of the same value). */
    Line value(Object value) {
        if (value == null) {
            return ascii(NULL);
        } else if (value instanceof Long || value instanceof Integer || value instanceof Short
                || value instanceof Byte) {
            return number(((Number) value).longValue());
        } else if (value instanceof Boolean) {
            return ascii((Boolean) value ? TRUE : FALSE);
        } else if (value instanceof Number) {
            return ascii(value.toString().getBytes(StandardCharsets.US_ASCII));
        } else if (value instanceof Collection) {
            ascii('[');
            boolean first = true;
            for (Object item : (Collection<?>) value) {
                if (!first) {
                    ascii(SEPARATOR);
                }
                value(item);
                first = false;
            }
            return ascii(']');
        }
        return string(value.toString());
    }

    private static final byte[] NULL = "null".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] TRUE = "true".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] FALSE = "false".getBytes(StandardCharsets.US_ASCII);
    static final byte[] SEPARATOR = ", ".getBytes(StandardCharsets.US_ASCII);
}
