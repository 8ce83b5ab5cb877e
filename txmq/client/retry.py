"""Failed consumption: the message goes back to the broker, to the group's retry topic with a delay, or
to its dead-letter topic once it has been retried the maximum number of times.

The rules are the broker's (``AbstractSendMessageProcessor.consumerSendMsgBack``): a copy whose reconsume
count reached ``maxReconsumeTimes`` (16 by default, ``DefaultMQPushConsumer.maxReconsumeTimes``) goes to
``%DLQ%<group>``; any other goes to ``%RETRY%<group>`` at delay level ``3 + reconsume count`` (the client
sends level 0, ``ConsumeMessageConcurrentlyService.sendMessageBack``), counted one higher. txmq's broker
has no scheduled delivery, so the copy is stored at once and the consumer holds it until its delay
(``MessageStoreConfig.messageDelayLevel``) has passed since it was sent back (its born time).
"""

from __future__ import annotations

from txmq.broker.facade import Broker
from txmq.client.membership import dlq_topic, retry_topic
from txmq.protocol import Message, MessageExt
from txmq.transaction.constants import RESERVED_PROPERTIES

PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"  # MessageConst.PROPERTY_RECONSUME_TIME
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"  # MessageConst.PROPERTY_RETRY_TOPIC: the topic it was first sent to
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
# MessageStoreConfig.messageDelayLevel "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h", in ms.
DELAY_LEVELS_MS = tuple(s * 1000 for s in (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600,
                                            1200, 1800, 3600, 7200))


def reconsume_times(message: MessageExt) -> int:
    """How many times this message was sent back before (``MessageExt.getReconsumeTimes``)."""
    return int(message.properties.get(PROPERTY_RECONSUME_TIME, "0"))


def due_ms(message: MessageExt) -> int:
    """When a retry copy may be consumed: stored at delay level ``3 + (count - 1)``, which is
    ``2 + count`` for a copy counting ``count``; an original is due at once."""
    times = reconsume_times(message)
    if times == 0:
        return message.born_timestamp
    level = min(2 + times, len(DELAY_LEVELS_MS))  # ScheduleMessageService caps at the highest level
    return message.born_timestamp + DELAY_LEVELS_MS[level - 1]


def send_back(broker: Broker, group: str, message: MessageExt, max_reconsume_times: int) -> bool:
    """Send a failed message back; True when it went to the dead-letter topic."""
    times = reconsume_times(message)
    dead = times >= max_reconsume_times
    user = {k: v for k, v in message.properties.items() if k not in RESERVED_PROPERTIES}
    user.setdefault(PROPERTY_RETRY_TOPIC, message.topic)
    uniq = message.transaction_id or str(message.commitlog_offset)
    user.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, uniq)
    user[PROPERTY_RECONSUME_TIME] = str(times + 1)
    topic = dlq_topic(group) if dead else retry_topic(group)
    broker.send_message(Message(topic=topic, body=message.body, properties=user), uniq)
    return dead
