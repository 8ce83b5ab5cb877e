"""Names RocketMQ uses on the wire and in the store (``TopicValidator``, ``MessageConst``, ``MixAll``)."""

from txmq.store.message import PROPERTY_TAGS

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
SYSTEM_TOPICS = frozenset({HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC})
CHECKPOINT_GROUP = "CID_RMQ_SYS_TRANS"
HALF_QUEUE_ID = 0
OP_TAG = "d"

# Message properties.
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_KEYS = "KEYS"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_ID = "__transactionId__"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CLUSTER = "CLUSTER"
# txmq's own: marks a half re-appended by an admin resume (strict mode re-opens the transaction).
PROPERTY_RESUMED = "TXMQ_RESUMED"
# txmq's own: a discarded copy remembers which half it was, for the trace of a later admin resume.
PROPERTY_DISCARDED_HALF_OFFSET = "TXMQ_DISCARDED_HALF_OFFSET"
# txmq's own properties, unknown to upstream.
TXMQ_PROPERTIES = frozenset({PROPERTY_RESUMED, PROPERTY_DISCARDED_HALF_OFFSET})
# Properties only the broker may set: a client value would change what the broker does with the message
# (a bogus check count, a delay slipped past the transactional-send check...). The check-immunity property
# is the one transaction property a producer sets on purpose; tags and keys have their Message fields.
RESERVED_PROPERTIES = frozenset({
    PROPERTY_DELAY, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_PRODUCER_GROUP, PROPERTY_UNIQ_KEY, PROPERTY_TAGS, PROPERTY_KEYS,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, PROPERTY_TRANSACTION_ID, PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_CLUSTER,
}) | TXMQ_PROPERTIES
CLUSTER_NAME = "txmq"
