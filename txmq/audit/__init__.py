"""``txmq audit``: black-box conformance of a RocketMQ 5.x endpoint's transactional messages.

The audit drives any endpoint that speaks ``apache.rocketmq.v2.MessagingService`` with the official Python
client, records what a client can observe (a history), and judges that history against the invariant
catalogue (``txmq/catalogue/invariants.py``) read from the outside. The parts are libraries, one job each:

- ``workload``: the seeded plan (transactions, their local outcomes, client-side faults, consumer lapses,
  nemesis moments);
- ``history``: the client-side record, written atomically;
- ``driver``: runs the plan through the official client;
- ``nemesis``: starts, SIGKILLs and restarts a launched endpoint;
- ``members``: the consumer group's members over remoting (``--group-churn``), each in a process of its
  own (``member_process``);
- ``checkers``: findings per catalogue entry, and the figures; ``groups``: the consumer group's;
- ``report``: terminal table, JSON and plot;
- ``cli``: the ``txmq audit`` command, which only wires them together.
"""
