"""``python -m spark_validation TRACE ...``: the same job as ``txmq validate`` and the spark-submit script."""

import sys

from spark_validation.job import main

sys.exit(main())
