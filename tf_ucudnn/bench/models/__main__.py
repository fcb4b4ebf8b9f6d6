"""``python -m tf_ucudnn.bench.models --worker MODEL MODE BYTES N PRECISION [PROFILE_DIR]``:
one run of the model mode in this process
(:func:`tf_ucudnn.bench.models.worker.run_worker`); prints ``RESULT {json}``."""

import json
import sys

from tf_ucudnn.bench.models.worker import run_worker

if len(sys.argv) in (7, 8) and sys.argv[1] == "--worker":
    out = run_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6],
                     *sys.argv[7:])
    print("RESULT " + json.dumps(out), flush=True)
    sys.exit(0)
print("run through `tf-ucudnn bench models --models ...`", file=sys.stderr)
sys.exit(2)
