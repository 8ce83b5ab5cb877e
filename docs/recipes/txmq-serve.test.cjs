// A test of an application on RocketMQ's Node.js client (rocketmq-client-nodejs), with Node's own test
// runner, against `txmq serve --clock manual` (docs/serve.md, "Recipes"): `node --test txmq-serve.test.cjs`.
// The test owns the broker's clock: a transaction left open is checked after one advance, a delayed message
// comes after one advance. At the end serve is stopped; `--judge` makes it check the session's trace
// against txmq's invariant catalogue and exit 1 on a violation, which fails the run.
//
// `txmq` is found on PATH, or where the environment variable TXMQ says. txmq's test suite runs this file
// as printed (tests/test_recipes.py).
const { test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const { once } = require('node:events');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb.js');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'txmq-serve-'));
const log = path.join(dir, 'serve.log');
let serve;
let endpoints;
let admin; // HOST:PORT of serve's admin interface (the clock)

before(async () => {
  serve = spawn(process.env.TXMQ ?? 'txmq', ['serve', '--port', '0', '--clock', 'manual', '--judge',
    '--store', path.join(dir, 'store'), '--trace', path.join(dir, 'session.ndjson'),
    '--topic', 'Orders:TRANSACTION', '--topic', 'Reminders:DELAY',
    '--proxy', 'min_long_polling_ms=1000'], // an empty receive then costs a second, not five
  { stdio: ['ignore', 'pipe', fs.openSync(log, 'w')] });
  // first line: "txmq serve: listening on 127.0.0.1:40113 (...)"; then "txmq serve: admin on 127.0.0.1:40117 (...)"
  for await (const line of readline.createInterface({ input: serve.stdout })) {
    endpoints ??= line.match(/listening on (\S+:\d+)/)?.[1];
    admin = line.match(/admin on (\S+:\d+)/)?.[1];
    if (admin) break;
  }
  assert.ok(endpoints && admin, `txmq serve ended before printing its addresses: ${fs.readFileSync(log, 'utf8')}`);
});

after(async () => {
  serve.kill('SIGTERM'); // serve completes the trace, then judges it (--judge)
  const [code] = await once(serve, 'exit');
  serve.stdout.destroy();
  assert.equal(code, 0, fs.readFileSync(log, 'utf8'));
  fs.rmSync(dir, { recursive: true }); // kept above, for a look at the trace, when it failed
});

// The admin interface: HTTP and JSON on loopback (docs/serve.md, "Time belongs to the test").
async function call(pathname, body) {
  const response = await fetch(`http://${admin}${pathname}`, body === undefined ? {} : {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(response.status, 200);
  return response.json();
}
const advance = async (ms) => (await call('/clock/advance', { ms })).now_ms; // once what fell due has run
const now = async () => (await call('/clock')).now_ms;

test('an open transaction is checked after one advance', async () => {
  let checked;
  const called = new Promise((resolve) => { checked = resolve; });
  const checker = { // the application's check listener
    async check(messageView) {
      checked(messageView.messageId);
      return TransactionResolution.COMMIT;
    },
  };
  const producer = new Producer({ endpoints, topic: 'Orders', checker });
  await producer.startup();
  try {
    const transaction = producer.beginTransaction();
    const receipt = await producer.send({ topic: 'Orders', body: Buffer.from('order 1') }, transaction);
    // neither commit nor rollback: as if the application had died before deciding
    for (let i = 0; i < 300 && !(await call('/producers')).producers.Orders; i++) { // a 5.x producer's group is its topic
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await advance(6_000 + 30_000); // the transaction timeout, then a check interval (upstream's defaults)
    const timeout = new Promise((resolve) => setTimeout(resolve, 10_000, 'not called'));
    assert.equal(await Promise.race([called, timeout]), receipt.messageId);
  } finally {
    await producer.shutdown();
  }
});

test('a delayed message comes after one advance', async () => {
  const consumer = new SimpleConsumer({ endpoints, consumerGroup: 'reminder-sender',
    subscriptions: new Map().set('Reminders', '*'), awaitDuration: 1000 });
  await consumer.startup();
  const producer = new Producer({ endpoints, topic: 'Reminders' });
  await producer.startup();
  try {
    const due = new Date((await now()) + 60_000); // in a minute of the broker's time
    await producer.send({ topic: 'Reminders', body: Buffer.from('call back'), deliveryTimestamp: due });
    assert.deepEqual(await consumer.receive(16, 15_000), [], 'delivered before its time');
    await advance(61_000); // past its time
    let received = [];
    for (let i = 0; i < 10 && received.length === 0; i++) {
      received = await consumer.receive(16, 15_000);
    }
    assert.equal(received.length, 1);
    assert.equal(received[0].body.toString(), 'call back');
    await consumer.ack(received[0]);
  } finally {
    await producer.shutdown();
    await consumer.shutdown();
  }
});
