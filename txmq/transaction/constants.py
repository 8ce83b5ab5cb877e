"""Names RocketMQ uses on the wire and in the store (``TopicValidator``, ``MessageConst``, ``MixAll``)."""

from txmq.store.message import PROPERTY_TAGS

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_MAX_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # TimerMessageStore.TIMER_TOPIC: delayed messages until their time
SYSTEM_TOPICS = frozenset({HALF_TOPIC, OP_TOPIC, CHECK_MAX_TOPIC, TIMER_TOPIC})
TIMER_GROUP = "CID_RMQ_SYS_TIMER"  # txmq's: the timer queue's committed offset is this group's
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
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"  # MessageConst: a message's delivery time
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"  # MessageConst: when the timer puts it into its real topic
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"  # MessageConst.PROPERTY_SHARDING_KEY: a FIFO message's group
# txmq's own: marks a half re-appended by an admin resume (strict mode re-opens the transaction).
PROPERTY_RESUMED = "TXMQ_RESUMED"
# txmq's own: a discarded copy remembers which half it was, for the trace of a later admin resume.
PROPERTY_DISCARDED_HALF_OFFSET = "TXMQ_DISCARDED_HALF_OFFSET"
# txmq's own: a delayed message put into its real topic names its timer record (txmq.transaction.timer).
PROPERTY_TIMER_QUEUE_OFFSET = "TXMQ_TIMER_QUEUE_OFFSET"
# txmq's own properties, unknown to upstream.
TXMQ_PROPERTIES = frozenset({PROPERTY_RESUMED, PROPERTY_DISCARDED_HALF_OFFSET, PROPERTY_TIMER_QUEUE_OFFSET})
# Properties only the broker may set: a client value would change what the broker does with the message
# (a bogus check count, a delay slipped past the transactional-send check...). The check-immunity property
# is the one transaction property a producer sets on purpose; tags and keys have their Message fields.
RESERVED_PROPERTIES = frozenset({
    PROPERTY_DELAY, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_PRODUCER_GROUP, PROPERTY_UNIQ_KEY, PROPERTY_TAGS, PROPERTY_KEYS,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, PROPERTY_TRANSACTION_ID, PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_CLUSTER, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_OUT_MS, PROPERTY_SHARDING_KEY,
}) | TXMQ_PROPERTIES
CLUSTER_NAME = "txmq"
