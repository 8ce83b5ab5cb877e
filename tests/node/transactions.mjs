// The official RocketMQ Node.js client (rocketmq-client-nodejs) against `txmq serve`.
//
// Usage: TXMQ_NODE_MODULES=<dir holding node_modules> node transactions.mjs HOST:PORT TOPIC GROUP
// A commit, a rollback, and two orphans the checker resolves (one COMMIT, one ROLLBACK); a simple consumer
// receives until both committed messages came and both orphans were checked. Prints one JSON line:
// message body -> times received, and the bodies the checker was asked about.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.env.TXMQ_NODE_MODULES, 'node_modules', 'noop.js'));
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb.js');

const [endpoints, topic, group] = process.argv.slice(2);
const checked = [];
const checker = {
  async check(messageView) {
    const body = messageView.body.toString();
    checked.push(body);
    return body === 'orphan-commit' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
  },
};

const deadline = Date.now() + 60_000;
const producer = new Producer({ endpoints, topic, checker, requestTimeout: 5000 });
await producer.startup();
for (const [body, end] of [['commit', 'commit'], ['rollback', 'rollback'], ['orphan-commit', null],
  ['orphan-rollback', null]]) {
  const transaction = producer.beginTransaction();
  await producer.send({ topic, body: Buffer.from(body) }, transaction);
  if (end === 'commit') await transaction.commit();
  if (end === 'rollback') await transaction.rollback();
}

const consumer = new SimpleConsumer({
  endpoints, consumerGroup: group, subscriptions: new Map().set(topic, '*'), awaitDuration: 2000,
  requestTimeout: 5000,
});
await consumer.startup();
const seen = {};
// until both committed messages came and the rollback orphan was checked too (its check may come later)
while (Date.now() < deadline && !(seen.commit && seen['orphan-commit'] && checked.includes('orphan-rollback'))) {
  for (const message of await consumer.receive(16, 5000)) {
    const body = message.body.toString();
    seen[body] = (seen[body] ?? 0) + 1;
    await consumer.ack(message);
  }
}
console.log(JSON.stringify({ seen, checked }));
try {
  await consumer.shutdown();
  await producer.shutdown();
} catch {
  // the client's logger may already be closed: nothing the test needs
}
process.exit(0);
