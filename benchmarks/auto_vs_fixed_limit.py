"""One memory-cap run of a model under the rewrite at one workspace limit, with
its plans: how `workspace_limit="auto"` plans (the limit each kernel planned
within, and what was free then) against a fixed limit.

    python benchmarks/auto_vs_fixed_limit.py LIMIT [MODEL CAP_GIB BATCH]

LIMIT is "auto" or bytes; MODEL defaults to vgg16, the cap to 8 GiB, N to 64.
Run each limit in its own process on its own GPU (CUDA_VISIBLE_DEVICES), side
by side; set UCUDNN_DEBUG_OUTPUT=1 for the plans on stderr. Prints one RESULT
line (status, ms per step, peak bytes) and one PLAN line per kernel.
"""

import sys

from tf_ucudnn.bench import memory_cap


def main(argv):
    limit = argv[0] if argv[0] == "auto" else int(argv[0])
    model = argv[1] if len(argv) > 1 else "vgg16"
    cap = int(argv[2]) << 30 if len(argv) > 2 else 8 << 30
    batch = int(argv[3]) if len(argv) > 3 else 64
    r = memory_cap.run_worker(model, "ucudnn", limit, cap, batch, steps_per_epoch=5, epochs=2)
    print("RESULT", limit, r["status"], r.get("step_ms"), r.get("peak_bytes"),
          r.get("message", "")[-200:])
    import tf_ucudnn

    for p in tf_ucudnn.plans():
        print("PLAN", p["pass"], p["shape"][:40], p["workspace_limit"], p["workspace_bytes"],
              p["time_ms"], p["note"])


if __name__ == "__main__":
    main(sys.argv[1:])
