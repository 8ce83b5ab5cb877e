"""The broker: one node's transactional broker, in layers that import one way (pyproject.toml's
contract): ``runtime`` (the timed services on threads with the system clock) uses ``facade`` (``Broker``:
every request under the broker lock), which uses ``core`` (``BrokerCore``: lifecycle and timed
services), which uses its parts: ``admission`` (what the broker refuses before it stores anything),
``delivery`` (reads for consumers), ``admin`` (read-only inspection) and ``timed`` (the timed services,
stated once). Users import ``Broker`` and ``BrokerRuntime`` from ``txmq``."""
