package txmq.agent;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The trace file and its one sequencer: every event takes {@link #LOCK}, gets {@code ts = max(last, now)}
 * and the next {@code seq} under it, and is written with one unbuffered write, so the operating system has
 * it when the broker goes on (a SIGKILL loses at most the event in flight).
 *
 * <p>Store events take the lock inside CommitLog's putMessageLock (upstream's
 * {@code DefaultMessageStore.onCommitLogAppend} is called under it), so they come out in commit-log order;
 * nothing here ever takes putMessageLock, so the two locks are always taken in that order.
 */
final class Trace {
    static final Object LOCK = new Object();
    private static final Pattern SEQ = Pattern.compile("\"seq\":\\s*(\\d+)");
    private static final Pattern TS = Pattern.compile("\"ts\":\\s*(-?\\d+)");
    private static final Pattern EVENT = Pattern.compile("\"event\":\\s*\"(\\w+)\"");

    /** Under LOCK: the lines of the event(s) being written, encoded in place (no String per event). */
    private static final Line LINE = new Line();
    private static FileOutputStream out;
    private static long seq;
    private static long lastTs;
    /** What the file held when the broker started: "new", "ended" (a clean END last) or "cut" (no END). */
    static String found = "new";

    private Trace() {
    }

    /**
     * Open {@code path} before the broker starts: a missing or cleanly ended trace starts afresh (one trace
     * covers the runs of one store since its last clean shutdown), a trace without END is continued after
     * its last complete line (what a SIGKILL left: a torn last line is cut off).
     */
    static void prepare(File path) throws IOException {
        File dir = path.getAbsoluteFile().getParentFile();
        if (dir != null && !dir.isDirectory()) {
            throw new IOException("no such directory " + dir);
        }
        String last = null;
        if (path.isFile() && path.length() > 0) {
            last = cutToLastLine(path);
        }
        Matcher event = last == null ? null : EVENT.matcher(last);
        if (event != null && event.find()) {
            found = "END".equals(event.group(1)) ? "ended" : "cut";
        } else if (last != null && last.contains("\"format\"")) {
            found = "cut";  // a header and no event yet
        }
        if ("cut".equals(found)) {
            Matcher s = SEQ.matcher(last);
            Matcher t = TS.matcher(last);
            seq = s.find() ? Long.parseLong(s.group(1)) + 1 : 0;
            lastTs = t.find() ? Long.parseLong(t.group(1)) : 0;
        }
        out = new FileOutputStream(path, "cut".equals(found));
    }

    /** The last complete line of the file, after cutting off a torn one (no newline at its end). */
    private static String cutToLastLine(File path) throws IOException {
        try (RandomAccessFile file = new RandomAccessFile(path, "rw")) {
            long end = file.length();
            long from = Math.max(0, end - 65536);
            byte[] tail = new byte[(int) (end - from)];
            file.seek(from);
            file.readFully(tail);
            int stop = tail.length;
            while (stop > 0 && tail[stop - 1] != '\n') {
                stop--;
            }
            file.setLength(from + stop);
            int start = stop - 1;
            while (start > 0 && tail[start - 1] != '\n') {
                start--;
            }
            return stop == 0 ? null : new String(tail, Math.max(start, 0), stop - Math.max(start, 0),
                    StandardCharsets.UTF_8);
        }
    }

    static boolean isOpen() {
        return out != null;
    }

    /** The header line (only for a new trace). */
    static void header(String json) {
        synchronized (LOCK) {
            LINE.reset();
            LINE.ascii((json + "\n").getBytes(StandardCharsets.UTF_8));
            write();
        }
    }

    /** Events that belong together (an END_TX COMMIT and its REAL_PUT): one critical section. */
    static void emit(Row... rows) {
        synchronized (LOCK) {
            if (out == null) {
                return;
            }
            long now = System.currentTimeMillis();
            lastTs = Math.max(lastTs, now);
            LINE.reset();
            for (Row row : rows) {
                row.appendJson(LINE, seq++, lastTs);
                LINE.ascii('\n');
            }
            write();
        }
    }

    /** The last event: no event is written after it. */
    static void close() {
        synchronized (LOCK) {
            try {
                if (out != null) {
                    out.close();
                }
            } catch (IOException ignored) {
                // nothing left to write
            }
            out = null;
        }
    }

    /** One write(2) of what {@link #LINE} holds (FileOutputStream does not buffer). */
    private static void write() {
        try {
            out.write(LINE.bytes(), 0, LINE.size());
        } catch (IOException e) {
            System.err.println("txmq agent: the trace lost an event: " + e);
        }
    }
}
