"""Client views of stored records: what a consumer, a check listener or an admin tool is shown."""

from __future__ import annotations

from txmq.protocol import MessageExt
from txmq.store.message import StoredMessage
from txmq.transaction.constants import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC


def client_view(message: StoredMessage, as_real: bool = False) -> MessageExt:
    """The ``MessageExt`` of a stored record; ``as_real`` relabels a half with its real topic and queue,
    as a check request's body is (``AbstractTransactionalMessageCheckListener.sendCheckMessage``)."""
    topic, queue_id = message.topic, message.queue_id
    if as_real:
        topic = message.properties.get(PROPERTY_REAL_TOPIC, topic)
        queue_id = int(message.properties.get(PROPERTY_REAL_QUEUE_ID, queue_id))
    return MessageExt(
        topic=topic, queue_id=queue_id, queue_offset=message.queue_offset,
        commitlog_offset=message.commitlog_offset, body=message.body, properties=dict(message.properties),
        born_timestamp=message.born_timestamp, store_timestamp=message.store_timestamp,
        sysflag=message.sysflag, prepared_transaction_offset=message.prepared_transaction_offset,
    )
