"""``python -m tf_ucudnn.bench.memory_cap --worker SPEC``: one run of the memory-cap
benchmark in this process (:mod:`tf_ucudnn.bench.memory_cap.worker`)."""

import sys

from tf_ucudnn.bench.memory_cap.worker import _worker_main

sys.exit(_worker_main(sys.argv[1:]))
