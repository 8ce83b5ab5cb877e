"""txmq: the executable reference of RocketMQ-style transactional messaging.

The public API is re-exported here so that users write ``from txmq import Broker`` and never need
to know which module holds what.
"""

__version__ = "0.1.0"
