"""TLA+ with TLC: finding and installing the jar (``jar``), running TLC (``runner``) and reading its
output (``parser``), shared by model checking of the spec's models (``models``) and trace validation
(``traces``); ``cli`` is ``txmq spec``. The imports run one way: cli > traces > models > runner >
jar, parser.

Python API: :func:`txmq.tla.models.suite.check_models` over entries from
:func:`txmq.tla.models.manifest.load_manifest`; :func:`txmq.tla.runner.run_tlc` for a single
module/config pair.
"""
