import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.rocketmq.broker.filter.MessageEvaluationContext;
import org.apache.rocketmq.filter.expression.Expression;
import org.apache.rocketmq.filter.parser.SelectorParser;

/**
 * Upstream's verdict on SQL92 filters, for tests/test_sql92.py: each line of stdin is an expression and
 * a message's properties (fields separated by U+0001: expression, then key, value, key, value...); each
 * line of stdout says REFUSED (SelectorParser.parse throws), MATCH or NOMATCH (the expression evaluated
 * as ExpressionMessageFilter.isMatchedByCommitLog does: only Boolean TRUE matches, an exception does not).
 */
public class SelectorVerdicts {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        String line;
        while ((line = in.readLine()) != null) {
            String[] fields = line.split("\u0001", -1);
            Map<String, String> properties = new HashMap<>();
            for (int i = 1; i + 1 < fields.length; i += 2) {
                properties.put(fields[i], fields[i + 1]);
            }
            Expression expression;
            try {
                expression = SelectorParser.parse(fields[0].replace("\\n", "\n"));
            } catch (Throwable refused) {
                out.println("REFUSED");
                continue;
            }
            Object value;
            try {
                value = expression.evaluate(new MessageEvaluationContext(properties));
            } catch (Throwable thrown) {
                value = null;
            }
            out.println(value instanceof Boolean && (Boolean) value ? "MATCH" : "NOMATCH");
        }
    }
}
