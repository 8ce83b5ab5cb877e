"""Trace validation (broker -> spec): TLC accepts a broker trace only if the spec explains every
event. ``steps`` turns a trace into the trace spec's steps (with ``lookahead``, ``decisions`` and
``slots``), ``module`` writes them as TLA+, ``validation`` judges them window by window (``windows``),
``stream`` validates a file in bounded memory, ``batch`` joins short traces into one TLC run, and
``command`` is ``txmq spec validate-trace``."""
