"""The invariant catalogue, defined once, as data: ``invariants`` (every invariant txmq checks, and
the upstream facts), ``outcomes`` (what a user must tell apart though it breaks no invariant) and
``page`` (``docs/invariants.md``, made from both: ``python -m txmq.catalogue.page --markdown``). The
imports run one way: page > outcomes > invariants."""
