"""One member of the audit's consumer group, in a process of its own (``txmq.audit.members`` starts it):
the C++-core client's ``PushConsumer`` in clustering mode, which allocates the topic's queues among the
group's members client-side (upstream's ``AllocateMessageQueueAveragely``) and rebalances when the broker
says the group changed (NOTIFY_CONSUMER_IDS_CHANGED) or at its timer (``RebalanceService``).

    python -m txmq.audit.member_process SETTINGS_JSON

Each delivery is written to stdout as one line before the listener answers, so a SIGKILL loses no record
of what was consumed (the pipe keeps what was written). With ``wait`` it starts consuming only at a line
``go`` on stdin (a join at a set time, the process already up). A line on stdin, or its end, is a clean
leave:
``shutdown()``, which persists the consumed offsets (``RemoteBrokerOffsetStore.persistAll`` in
``DefaultMQPushConsumerImpl.shutdown``) and unregisters from the broker.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from txmq.audit import cpp_client
from txmq.audit.workload import Plan

PREFIX = "txmq-member "  # the lines meant for the parent (the client's library may print too)
# The client hands its C callback a batch of messages one at a time and stops at the first that is not
# CONSUME_SUCCESS, sending the whole batch back: the rest reach the retry topic never consumed at their
# position (seen: a skipped position, its message consumed only from the retry topic). Batches of one, as
# upstream's Java push consumer's default consumeMessageBatchMaxSize, make that rare; slow clients still
# see it, which txmq.checks.seen_consumptions.skipped_positions allows for.
ONE_AT_A_TIME = 1


def main(argv: Sequence[str]) -> int:
    """Run the member until told to leave; SETTINGS_JSON: namesrv, group, topic, instance, seed,
    lapse_share (which deliveries to fail, as the plan draws them), wait."""
    settings = json.loads(argv[0])
    client = cpp_client.load()
    plan = Plan(int(settings["seed"]), (), (), float(settings["lapse_share"]))
    statuses = client.ConsumeStatus
    writing = threading.Lock()

    def say(**fields: Any) -> None:
        with writing:
            sys.stdout.write(PREFIX + json.dumps(fields) + "\n")
            sys.stdout.flush()

    def on_message(message: Any) -> Any:
        tx = message.body.decode(errors="replace")
        attempt = message.reconsume_times + 1
        lapse = plan.lapses(tx, attempt)  # failed: RECONSUME_LATER sends it back to the retry topic
        say(t=time.monotonic(), tx=tx, attempt=attempt, message_id=message.id, topic=message.topic,
            queue=message.queue_id, offset=message.queue_offset, lapse=lapse)
        return statuses.RECONSUME_LATER if lapse else statuses.CONSUME_SUCCESS

    if settings["wait"] and sys.stdin.readline().strip() != "go":
        return 0  # told to leave before it joined
    consumer = client.PushConsumer(settings["group"])
    consumer.set_namesrv_addr(settings["namesrv"])
    consumer.set_instance_name(settings["instance"])  # one client id per member, though one host
    consumer.set_message_batch_max_size(ONE_AT_A_TIME)
    consumer.subscribe(settings["topic"], on_message)
    consumer.start()
    say(started=time.monotonic())
    sys.stdin.readline()
    consumer.shutdown()
    say(left=time.monotonic())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
