"""The anomaly atlas (issue #27): every known RocketMQ transactional anomaly as data and an executable
scenario. ``entries`` holds the entries, ``scenarios_*`` the scenarios (each drives an in-process broker
on a manual clock through txmq's public API, in either mode), ``runner`` runs them and judges each by its
catalogue name, ``page`` renders ``docs/atlas.md``, ``cli`` is ``txmq atlas``."""
