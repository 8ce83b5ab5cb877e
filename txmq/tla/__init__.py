"""Model-checking ``spec/`` with TLC: jar lookup and install, the runner, its output parser, the manifest.

Python API: :func:`txmq.tla.suite.check_models` over entries from :func:`txmq.tla.manifest.load_manifest`;
:func:`txmq.tla.runner.run_tlc` for a single module/config pair.
"""
