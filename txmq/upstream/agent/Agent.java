package txmq.agent;

import java.io.ByteArrayInputStream;
import java.io.File;
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;
import java.security.ProtectionDomain;
import java.util.LinkedHashMap;
import java.util.Map;

import javassist.ClassClassPath;
import javassist.ClassPool;
import javassist.CtClass;
import javassist.CtMethod;
import javassist.LoaderClassPath;

/**
 * txmq's trace agent for upstream RocketMQ's broker: {@code -javaagent:txmq-agent.jar=TRACE.ndjson}.
 *
 * <p>It inserts a call to {@link Hooks} into each of upstream's methods in {@link #TARGETS} (javassist, from
 * the distribution's lib/), and writes trace format v2 NDJSON. Before the broker's main runs, every target
 * class is loaded (and so instrumented) and every target method must have been found and instrumented;
 * otherwise the broker does not start and one line names the method: an upstream whose code moved would
 * give a trace with holes.
 */
public final class Agent {
    private static final String H = "txmq.agent.Hooks.";
    private static final String C = "txmq.agent.ConsumerHooks.";
    /** class, method, parameter count, code inserted before, code inserted after (null: none). */
    static final String[][] TARGETS = {
        // CommitLog.asyncPutMessage calls it for every appended record, inside putMessageLock.
        {"org.apache.rocketmq.store.DefaultMessageStore", "onCommitLogAppend", "3", H + "append($1, $2);", null},
        {"org.apache.rocketmq.broker.processor.EndTransactionProcessor", "processRequest", "2",
            H + "endTxBegin($1, $2);", H + "endTxEnd($_);"},
        // An END_TX that applied: its Op entry is buffered here (after the real message, for a commit).
        {"org.apache.rocketmq.broker.transaction.queue.TransactionalMessageServiceImpl", "deletePrepareMessage", "1",
            H + "opEntry($1);", null},
        {"org.apache.rocketmq.broker.transaction.queue.TransactionalMessageServiceImpl", "putBackHalfMsgQueue", "2",
            H + "renewBegin($1, \"CHECK\");", H + "renewEnd();"},
        {"org.apache.rocketmq.broker.transaction.queue.TransactionalMessageServiceImpl",
            "putImmunityMsgBackToHalfQueue", "1", H + "renewBegin($1, \"IMMUNITY\");", H + "renewEnd();"},
        {"org.apache.rocketmq.broker.processor.AdminBrokerProcessor", "resumeCheckHalfMessage", "2",
            H + "resumeBegin($2);", H + "renewEnd();"},
        {"org.apache.rocketmq.broker.transaction.queue.DefaultTransactionalMessageCheckListener", "resolveDiscardMsg",
            "1", H + "discardBegin($1);", H + "discardEnd();"},
        // Run on the check executor after resolveHalfMsg handed it over: the check is traced when sent.
        {"org.apache.rocketmq.broker.transaction.AbstractTransactionalMessageCheckListener", "sendCheckMessage", "1",
            H + "checkBegin($1);", H + "checkEnd();"},
        {"org.apache.rocketmq.broker.client.net.Broker2Client", "checkProducerTransactionState", "4",
            H + "checkSent($2);", null},
        {"org.apache.rocketmq.broker.client.ProducerManager", "registerProducer", "2",
            H + "registerBegin(this, $1, $2);", H + "registerEnd(this, $1, $2);"},
        {"org.apache.rocketmq.broker.client.ProducerManager", "callProducerChangeListener", "3",
            H + "producerChange($1, $2, $3);", null},
        {"org.apache.rocketmq.broker.transaction.queue.TransactionalMessageBridge", "getHalfMessage", "3",
            H + "halfRead($2);", null},
        {"org.apache.rocketmq.broker.transaction.queue.TransactionalMessageBridge", "getOpMessage", "3",
            null, H + "opRead($1, $2, $3, $_);"},
        {"org.apache.rocketmq.broker.transaction.queue.TransactionalMessageBridge", "updateConsumeOffset", "2",
            H + "checkpointMoved();", null},
        {"org.apache.rocketmq.broker.BrokerController", "start", "0", H + "brokerStart(this);", null},
        {"org.apache.rocketmq.broker.BrokerController", "shutdown", "0", null, H + "brokerShutdown();"},
        // The consumer side (ConsumerHooks): deliveries of pulls and pops, and the offsets groups commit.
        {"org.apache.rocketmq.broker.processor.DefaultPullMessageResultHandler", "handle", "11",
            C + "pulled($1, $3, $4);", null},
        {"org.apache.rocketmq.broker.processor.PopMessageProcessor", "readGetMessageResult", "4",
            C + "popped($1, $2);", null},
        {"org.apache.rocketmq.broker.offset.ConsumerOffsetManager", "commitOffset", "5",
            C + "committed($1, $2, $3, $4, $5);", null},
    };
    /** "class.method" -> null once instrumented, else why not. */
    private static final Map<String, String> STATUS = new LinkedHashMap<>();

    private Agent() {
    }

    public static void premain(String args, Instrumentation inst) {
        if (args == null || args.isEmpty()) {
            refuse("no trace file: give it as -javaagent:AGENT.jar=TRACE.ndjson");
        }
        File trace = new File(args);
        try {
            Trace.prepare(trace);
        } catch (Exception e) {
            refuse("cannot write the trace " + trace + ": " + e.getMessage());
        }
        for (String[] target : TARGETS) {
            STATUS.put(target[0] + "." + target[1], "not found (its class was not loaded)");
        }
        inst.addTransformer(new Transformer());
        ClassLoader loader = ClassLoader.getSystemClassLoader();
        for (String[] target : TARGETS) {
            try {
                Class.forName(target[0], false, loader);
            } catch (Throwable e) {
                STATUS.put(target[0] + "." + target[1], "not found: no class " + target[0]);
            }
        }
        for (Map.Entry<String, String> entry : STATUS.entrySet()) {
            if (entry.getValue() != null) {
                refuse("upstream's " + entry.getKey() + " " + entry.getValue()
                        + "; the broker is not started (its trace would have holes)");
            }
        }
    }

    /** One line on standard error, and the JVM ends before the broker starts. */
    private static void refuse(String why) {
        System.err.println("txmq agent: " + why);
        System.err.flush();
        Runtime.getRuntime().halt(3);
    }

    /** Instruments the target classes as they are loaded; records what it did in STATUS. */
    private static final class Transformer implements ClassFileTransformer {
        @Override
        public byte[] transform(ClassLoader loader, String name, Class<?> redefined, ProtectionDomain domain,
                                byte[] bytes) {
            String dotted = name == null ? "" : name.replace('/', '.');
            boolean wanted = false;
            for (String[] target : TARGETS) {
                wanted |= target[0].equals(dotted);
            }
            if (!wanted) {
                return null;
            }
            try {
                ClassPool pool = new ClassPool(true);
                pool.appendClassPath(new ClassClassPath(Hooks.class));
                if (loader != null) {
                    pool.appendClassPath(new LoaderClassPath(loader));
                }
                CtClass cls = pool.makeClass(new ByteArrayInputStream(bytes));
                for (String[] target : TARGETS) {
                    if (target[0].equals(dotted)) {
                        instrument(cls, target);
                    }
                }
                byte[] result = cls.toBytecode();
                cls.detach();
                return result;
            } catch (Throwable e) {
                for (String[] target : TARGETS) {
                    if (target[0].equals(dotted)) {
                        STATUS.put(target[0] + "." + target[1], "could not be instrumented: " + e);
                    }
                }
                return null;
            }
        }

        private static void instrument(CtClass cls, String[] target) throws Exception {
            String key = target[0] + "." + target[1];
            int params = Integer.parseInt(target[2]);
            CtMethod found = null;
            for (CtMethod method : cls.getDeclaredMethods(target[1])) {
                if (method.getParameterTypes().length == params) {
                    found = method;
                }
            }
            if (found == null) {
                STATUS.put(key, "with " + params + " parameter(s) not found in its class");
                return;
            }
            if (target[3] != null) {
                found.insertBefore(target[3]);
            }
            if (target[4] != null) {
                found.insertAfter(target[4]);
            }
            STATUS.put(key, null);
        }
    }
}
