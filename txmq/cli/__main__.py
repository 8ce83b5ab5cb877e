"""``python -m txmq.cli``: the ``txmq`` command, for the tests and tools that start it with the running
interpreter."""

import sys

from txmq.cli import main

sys.exit(main())
