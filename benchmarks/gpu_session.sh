#!/bin/bash
# Runs one measurement of docs/benchmarks.md on a GPU machine, from the repository root:
#
#   bash benchmarks/gpu_session.sh MODE [ARGS...]      (OUT=DIR: where results go, default ./gpu_out)
#
# The machine needs Linux x86_64 with an NVIDIA GPU and cuDNN 9, and `python3` with TensorFlow 2.21
# and this checkout's op library built (make build, then run from this checkout) or tf_ucudnn
# installed from its wheel. GPU_ENV=FILE: a shell file sourced first, e.g. one that activates that
# Python's environment. Wheels in .whl/ (highspy, Workspace Division's solver; CUPTI for the
# profiles) are installed into /tmp/site first. GPUS=A,B: the GPUs that modes of several GPUs
# use (default 0,1). The committed results are in docs/results/<experiment>/ under the names
# below with _h200 (the GPU) added; benchmarks/README.md lists what each mode answers. The GPU
# tests are Makefile targets: make test-gpu [GPUS=0,1,2,3], make test-gpu-wheel.
#
# MODE, by section of docs/benchmarks.md:
#   1  deepbench_eager|deepbench_eager_half|deepbench_dtype|pass_gpu
#   2  misses|stock_engine|transposed|speakerid
#   3  models_targets|step_profile     4  wd_vs_wr|models
#   5  xla_pair|xla_search|xla_profile 6  overhead_legacy|overhead_graph   7  model_planning
#   10 memory_cap|memory_cap_gpus|fit_profile 11 new_batch_size|plan_spread      12 bn_pair
#   setup (the GPUs), compare OLD_DIR MODE [ARGS] (this checkout against an older one, side by
#   side), bench MODE [ARGS] (tf-ucudnn bench of the tf_ucudnn on PYTHONPATH)
set -u
SCRIPT=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); export OUT
[ "${1:-}" = bench ] || echo "gpu_session.sh ${1:-}: results in $OUT/" >&2
if [ -n "${GPU_ENV:-}" ]; then
  source "$GPU_ENV"
fi
if [ -d .whl ]; then  # extra wheels sent along with the checkout
  [ -d /tmp/site ] || pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD:${PYTHONPATH:-}
else
  export PYTHONPATH=$PWD:${PYTHONPATH:-}
fi
export TF_CPP_MIN_LOG_LEVEL=2
# gpu I: the I-th GPU of GPUS=A,B,... (default 0,1), else GPU I. Two-GPU modes use gpu 0 and 1, so
# on a machine of four, GPUS=2,3 runs a second such mode beside one on GPUs 0 and 1.
gpu() { local ids; IFS=, read -ra ids <<< "${GPUS:-0,1}"; echo "${ids[$1]:-$1}"; }
# TF's profiler loads CUPTI: the nvidia-cuda-cupti-cu12 wheel's (sent in .whl), else the
# machine's CUDA's (for the profiling modes).
cupti_on_path() {
  local dir
  for dir in /tmp/site/nvidia/cuda_cupti/lib /usr/local/cuda/targets/x86_64-linux/lib \
             /usr/local/cuda-*/targets/x86_64-linux/lib; do
    if compgen -G "$dir/libcupti.so*" > /dev/null; then
      export LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-}; return
    fi
  done
  echo "gpu_session.sh: no libcupti.so found; TF's profiler will record no GPU activity" >&2
}
# DeepBench's layer set in two halves, for runs that exceed one device call's 10 minutes.
DEEPBENCH_A=ocr_08_3x3,ocr_09_3x3,ocr_10_3x3,ocr_11_3x3,facerec_12_3x3,facerec_13_3x3,facerec_14_3x3,facerec_15_3x3,facerec_16_3x3,vision_17_3x3,vision_18_3x3,vision_19_3x3,vision_20_3x3,vision_21_3x3,vision_22_3x3
DEEPBENCH_B=vision_30_5x5,vision_32_5x5,vision_35_5x5,facerec_36_3x3,facerec_38_3x3,facerec_41_3x3,speakerid_54_5x5,speakerid_55_3x3,speakerid_56_5x5,speakerid_57_3x3,speakerid_58_5x5,speakerid_59_3x3,speakerid_60_5x5,speakerid_61_3x3
with_checkout() {  # DIR MODE [ARGS]: this script's MODE with the tf_ucudnn of DIR (a folder holding
                   # an older checkout's tf_ucudnn/ with its op library built) first on the path,
                   # run from DIR (python -m puts the current folder first), with a benchmark
                   # database of its own
  local dir here=$PWD path; dir=$(cd "$1" && pwd) || return 1
  [ -f "$dir/tf_ucudnn/_ucudnn_ops.so" ] || { echo "$dir/tf_ucudnn/_ucudnn_ops.so is missing: \
give a folder that holds an older tf_ucudnn/ with its op library built" >&2; return 1; }
  path=$(echo "$PYTHONPATH" | tr ':' '\n' | grep -vx "$here" | paste -sd:)  # this checkout out
  (cd "$dir" && PYTHONPATH=$dir:$path UCUDNN_DATABASE=/tmp/ucudnn_db_$(basename "$dir").sqlite3 \
     bash "$SCRIPT" "${@:2}")
}
case "$1" in
  bench)  # MODE [ARGS]: `tf-ucudnn bench MODE ARGS` of the tf_ucudnn on PYTHONPATH; one from
          # before the subcommands (an older checkout under compare) gets its one-command form
    pkg=$(python3 -c "import importlib.util as u; print(u.find_spec('tf_ucudnn').submodule_search_locations[0])")
    if grep -q "def build_parser" "$pkg/bench/cli.py"; then
      exec python3 -m tf_ucudnn.bench "${@:2}"
    fi
    mode=$2; args=("${@:3}")
    case $mode in
      layers|models) exec python3 -m tf_ucudnn.bench "${args[@]}" ;;
      memory-cap) exec python3 -m tf_ucudnn.bench "${args[@]/#--caps/--memory-cap}" ;;
      overhead) exec python3 -m tf_ucudnn.bench --overhead "${args[@]/#--limit/--limits}" ;;
      plot) exec python3 -m tf_ucudnn.bench --plot "${args[@]/#--output/--png}" ;;
      *) echo "bench: unknown mode $mode" >&2; exit 2 ;;
    esac ;;
  compare)  # OLD_DIR MODE [ARGS]: MODE ARGS with this checkout on GPU 0 and with the tf_ucudnn of
            # OLD_DIR on GPU 1, at once, in one call; files in $OUT/this/ and $OUT/old/. OLD_DIR:
            # a folder with an older checkout's tf_ucudnn/ and its op library built (e.g. a git
            # worktree of the older commit, after make build). Modes that run `tf-ucudnn
            # bench` (xla_pair, models_targets, memory_cap, ...) drive either version; e.g.
            # compare /tmp/old xla_pair resnet50, compare /tmp/old memory_cap vgg16 8GiB 32 512
    old=$2; mkdir -p "$OUT/this" "$OUT/old"
    CUDA_VISIBLE_DEVICES=$(gpu 0) OUT=$OUT/this bash "$SCRIPT" "${@:3}" &
    CUDA_VISIBLE_DEVICES=$(gpu 1) OUT=$OUT/old with_checkout "$old" "${@:3}" &
    wait
    for side in this old; do
      echo "== $side"; tail -n 8 "$OUT/$side"/*.log 2>/dev/null
    done ;;
  setup) nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpus.txt" ;;
  deepbench_eager)  # the same with every CUDA module loaded at start: stock TF's autotuner
                    # then no longer times first (module-loading) runs of its candidates
    CUDA_MODULE_LOADING=EAGER timeout "${2:-900}" bash "$SCRIPT" bench layers --set deepbench \
      --limits 64MiB,256MiB --iters 5 --json "$OUT/deepbench_eager.json" 2>&1 \
      | grep -v WARNING | tee "$OUT/deepbench_eager.log" ;;
  deepbench_eager_half)  # deepbench_eager in two calls of the device's 10-minute limit: A or B,
                         # then benchmarks/combine_layer_runs.py joins the two JSON files
    half=${2:-A}
    if [ "$half" = A ]; then
      layers=$DEEPBENCH_A
    else
      layers=$DEEPBENCH_B
    fi
    CUDA_MODULE_LOADING=EAGER timeout "${3:-560}" bash "$SCRIPT" bench layers --set deepbench \
      --limits 64MiB,256MiB --iters 5 --layers "$layers" --json "$OUT/deepbench_eager_$half.json" 2>&1 \
      | grep -v WARNING | tee "$OUT/deepbench_eager_$half.log" ;;
  deepbench_dtype)  # half precision: deepbench_eager's halves at DTYPE (float16|bfloat16) and one
                    # limit: DTYPE A|B|LAYERS [LIMITS] [TIMEOUT] [ITERS] [TAG]; a comma list of
                    # layers instead of A|B reruns those (files deepbench_DTYPE_TAG.*)
    half=${3:-A}; tag=${7:-$half}
    if [ "$half" = A ]; then
      layers=$DEEPBENCH_A
    elif [ "$half" = B ]; then
      layers=$DEEPBENCH_B
    else
      layers=$half
    fi
    # The figures are written beside the JSON: keep them out of $OUT (a call returns 8 files).
    mkdir -p /tmp/figures
    CUDA_MODULE_LOADING=EAGER timeout "${5:-560}" bash "$SCRIPT" bench layers --set deepbench \
      --limits "${4:-64MiB}" --iters "${6:-5}" --dtype "$2" --layers "$layers" \
      --json "$OUT/deepbench_$2_$tag.json" --png "/tmp/figures/deepbench_$2_$tag" 2>&1 \
      | grep -v WARNING | tee "$OUT/deepbench_$2_$tag.log" ;;
  pass_gpu)  # wall and GPU kernel time per pass (pass_times.py --profile): TAG DTYPE LAYERS
             # [CALLS] ["STOCK_MIBS"] [TIMEOUT]; stock TF at 64 MiB, then at 8 GiB (default
             # "64 8192"), each against tf_ucudnn at 64 MiB
    cupti_on_path
    for mib in ${6:-64 8192}; do
      CUDA_MODULE_LOADING=EAGER TF_CUDNN_WORKSPACE_LIMIT_IN_MB=$mib timeout "${7:-280}" \
        python3 benchmarks/pass_times.py --profile --dtype "$3" --layers "$4" --calls "${5:-20}" \
        --json "$OUT/pass_gpu_$2_stock$mib.json" 2>&1 \
        | grep -v "WARNING\|^I0000\|^W0000\|^E0000\|^To enable" | tee "$OUT/pass_gpu_$2_stock$mib.log"
    done ;;
  misses)  # the layers where the legacy algorithms could not match stock TF
    timeout "${2:-580}" bash "$SCRIPT" bench layers --set deepbench --limits 64MiB,256MiB --iters 5 \
      --layers ocr_11_3x3,facerec_12_3x3,facerec_16_3x3,vision_30_5x5,vision_32_5x5,speakerid_54_5x5 \
      --json "$OUT/misses.json" 2>&1 | tee "$OUT/misses.log" ;;
  stock_engine)  # the engine stock TF runs for one pass, from cuDNN's log: [LIMITS_MIB] [TAG]
                 # [stock_engine_log.py's options]; default speakerid_54 backward-data at 64, 8192
    for mib in ${2:-64 8192}; do
      rm -f /tmp/cudnn.log
      TF_CUDNN_WORKSPACE_LIMIT_IN_MB=$mib CUDNN_LOGLEVEL_DBG=3 CUDNN_LOGDEST_DBG=/tmp/cudnn.log \
        python3 benchmarks/stock_engine_log.py "${@:4}" 2>&1 | grep "ms per call" | sed "s/^/$mib MiB: /"
      last=$(grep -n "cudnnBackendExecute" /tmp/cudnn.log | tail -1 | cut -d: -f1)
      echo "log: $(wc -l < /tmp/cudnn.log) lines; last cudnnBackendExecute at ${last:-none}"
      [ -n "$last" ] && sed -n "$((last - 3)),$((last + 45))p" /tmp/cudnn.log | cut -c1-220
      grep -o "eng[0-9]*{[^}]*}\|engineId[^,]*\|engine_id[^,]*" /tmp/cudnn.log | sort | uniq -c | sort -rn | head
    done 2>&1 | tee "$OUT/stock_engine${3:+_$3}.log" ;;
  transposed)  # transposed graph candidates (UCUDNN_GRAPH_LAYOUTS): their correctness tests,
               # speakerid_54 (whole layer, lazy and eager module loading; backward-data alone,
               # eager) with its candidate table, all with transposed candidates proposed (the
               # tests set their own value)
    export UCUDNN_GRAPH_LAYOUTS=both
    timeout 400 python3 -m pytest tests/test_graph_engines.py -m gpu -q -p no:cacheprovider \
      -k every_plan 2>&1 | tail -30 | tee "$OUT/transposed_tests.log"
    python3 benchmarks/engine_table.py --sizes 256,64,32,16,8 2>&1 | grep -v WARNING \
      > "$OUT/speakerid_table_transposed.log"
    for loading in LAZY EAGER; do
      CUDA_MODULE_LOADING=$loading timeout 300 bash "$SCRIPT" bench layers --set deepbench \
        --limits 64MiB --iters 5 --layers speakerid_54_5x5 \
        --json "$OUT/speakerid_transposed_$loading.json" 2>&1 | grep -v WARNING
    done 2>&1 | tee "$OUT/speakerid_transposed.log"
    CUDA_MODULE_LOADING=EAGER timeout 300 bash "$SCRIPT" bench layers --set deepbench \
      --limits 64MiB --iters 5 --layers speakerid_54_5x5 --passes backward-data 2>&1 \
      | grep -v WARNING | tee -a "$OUT/speakerid_transposed.log" ;;
  speakerid)  # DeepBench's float32 miss at 64 MiB under UCUDNN_GRAPH_SEARCH=exhaustive: every
              # candidate as timed at each size (no pruning), then the layer against stock TF
    export UCUDNN_GRAPH_SEARCH=exhaustive
    UCUDNN_GRAPH_PRUNE_FACTOR=0 python3 benchmarks/engine_table.py --sizes 256,128,64,32,16,8 2>&1 \
      | grep -v WARNING > "$OUT/speakerid_table.log"
    timeout "${2:-300}" bash "$SCRIPT" bench layers --set deepbench --limits 64MiB --iters 5 \
      --layers speakerid_54_5x5 --json "$OUT/speakerid.json" 2>&1 | tee "$OUT/speakerid.log" ;;
  models_targets)  # whole training steps of MODEL [PRECISION]: stock TF at 8 GiB and
                   # 64 MiB, the rewrite at 64 MiB (and with the layout optimizer on, for
                   # float32), and the first step cold and with a warm benchmark database
    # [TIMEOUT] [MODES]: MODES replaces the settings (e.g. stock,rewrite); RUNS=K: K processes
    # per setting and K cold/warm pairs, the table of their medians (first steps vary by seconds)
    modes=stock,rewrite; [ "${3:-float32}" = float32 ] && modes=$modes,rewrite-layout
    modes=${5:-$modes}
    timeout "${4:-560}" bash "$SCRIPT" bench models --models "$2" --limits 64MiB --planning \
      --modes "$modes" --precision "${3:-float32}" --runs "${RUNS:-1}" \
      --json "$OUT/models_targets_$2_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/models_targets_$2_${3:-float32}.log" ;;
  step_profile)  # the same without XLA: stock TF at 8 GiB against the rewrite at 64 MiB
    cupti_on_path
    timeout "${5:-400}" python3 benchmarks/xla_profile.py "${2:-resnet50}" ${3:-128} "${4:-float32}" \
      stock,rewrite 2>&1 | grep -v "WARNING\|^I0000\|^W0000" \
      | tee "$OUT/step_profile_${2:-resnet50}.log" ;;
  wd_vs_wr)  # Workspace Reuse at T per kernel against Workspace Division of a total T (VGG-16)
    timeout "${2:-300}" bash "$SCRIPT" bench models --models vgg16 --limits 64MiB --totals 64MiB \
      --modes rewrite,rewrite-wd --json "$OUT/wd_vs_wr.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/wd_vs_wr.log" ;;
  models) timeout "${2:-580}" bash "$SCRIPT" bench models --models vgg16,alexnet,resnet18 \
            --limits 64MiB --totals 256MiB --planning --json "$OUT/models.json" 2>&1 | tee "$OUT/models.log" ;;
  xla_pair)  # stock XLA against tf_ucudnn under XLA only: MODEL [PRECISION] (RUNS=K: K processes
             # per setting, medians)
    timeout "${4:-400}" bash "$SCRIPT" bench models --models "$2" --limits 64MiB --xla \
      --modes stock-xla,ucudnn-xla --precision "${3:-float32}" --runs "${RUNS:-1}" \
      --json "$OUT/xla_pair_$2_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_pair_$2_${3:-float32}.log" ;;
  bn_pair)  # batch norm on the convolution's statistics against stock: MODEL [PRECISION] [TIMEOUT]:
            # stock TF (8 GiB and 64 MiB), stock XLA, tf_ucudnn under XLA and
            # rewrite_model(fuse_batch_norm=True) without and with XLA, at 64 MiB (RUNS=K: K
            # processes each)
    timeout "${4:-560}" bash "$SCRIPT" bench models --models "$2" --limits 64MiB --xla \
      --modes stock,stock-xla,ucudnn-xla,ucudnn-bn,ucudnn-bnstats-xla,ucudnn-bn-xla --precision "${3:-float32}" --runs "${RUNS:-1}" \
      --json "$OUT/bn_pair_$2_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/bn_pair_$2_${3:-float32}.log" ;;
  xla_search)  # UCUDNN_GRAPH_SEARCH under XLA: stock XLA and tf_ucudnn under XLA (default
               # search), then tf_ucudnn with SEARCH: MODEL [PRECISION] [SEARCH] [TIMEOUT];
               # RUNS=K: K processes per setting. The database keeps each search's tables
               # apart (schema 4), so the second run is not seeded from the first.
    timeout "${5:-560}" sh -c "bash $SCRIPT bench models --models $2 --limits 64MiB --xla \
      --modes stock-xla,ucudnn-xla --precision ${3:-float32} --runs ${RUNS:-1} \
      --json $OUT/xla_search_$2_${3:-float32}.json && UCUDNN_GRAPH_SEARCH=${4:-wide} \
      bash $SCRIPT bench models --models $2 --limits 64MiB --xla --modes ucudnn-xla \
      --precision ${3:-float32} --runs ${RUNS:-1} \
      --json $OUT/xla_search_$2_${3:-float32}_${4:-wide}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_search_$2_${3:-float32}.log" ;;
  xla_profile)  # where an XLA step's GPU time goes: MODEL [BATCH] [PRECISION] (TF's profiler;
                # CUPTI: cupti_on_path)
    cupti_on_path
    timeout "${5:-560}" python3 benchmarks/xla_profile.py "${2:-resnet50}" ${3:-128} "${4:-float32}" \
      2>&1 | grep -v "WARNING\|^I0000\|^W0000" | tee "$OUT/xla_profile_${2:-resnet50}.log" ;;
  overhead_legacy)  # the 29-layer table under the conditions of the first one (legacy
                   # algorithms only: a plan's search is one cudnnFind per pass), then the
                   # graph-engine layers (overhead_graph), in one call
    UCUDNN_ENGINES=legacy timeout "${2:-300}" bash "$SCRIPT" bench overhead --set deepbench \
      --iters 20 --json "$OUT/overhead_legacy.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/overhead_legacy.log"
    bash "$SCRIPT" overhead_graph "${3:-240}" ;;
  overhead_graph)  # the same on five layers whose plans use graph-API engines (direct call:
                   # cudnnBackendExecute with a prebuilt variant pack)
    timeout "${2:-240}" bash "$SCRIPT" bench overhead --set deepbench --iters 20 \
      --layers facerec_15_3x3,ocr_11_3x3,vision_21_3x3,vision_30_5x5,speakerid_57_3x3 \
      --json "$OUT/overhead_graph.json" 2>&1 | grep -v WARNING | tee "$OUT/overhead_graph.log" ;;
  model_planning)  # where a model's cold planning goes: MODEL [PRECISION] [UCUDNN_ENGINES]: the
                   # rewrite's first step at 64 MiB without a database, its cost lines summed
                   # (TAG=x: files named ..._x, for runs with other knobs)
    tag=${2:-vgg16}_${3:-float32}_${4:-auto}${TAG:+_$TAG}
    UCUDNN_DATABASE=off UCUDNN_DEBUG_OUTPUT=1 UCUDNN_ENGINES=${4:-auto} timeout "${5:-200}" \
      python3 -m tf_ucudnn.bench.models --worker "${2:-vgg16}" rewrite 67108864 \
      "$(python3 -c "from tf_ucudnn.bench import models; print(models.DEFAULT_BATCH['${2:-vgg16}'])")" \
      "${3:-float32}" 2> "$OUT/planning_debug_$tag.log" | python3 -c "import json, sys
for l in sys.stdin:
    if l.startswith('RESULT '):
        r = json.loads(l[7:]); print(f\"$tag: first step {r['first_step_s']:.2f} s (kernels planning {r['planning_s']:.2f} s), step {r['step_ms']:.1f} ms\")" \
      | tee "$OUT/planning_$tag.log"
    python3 benchmarks/planning_profile.py "$OUT/planning_debug_$tag.log" | tee -a "$OUT/planning_$tag.log" ;;
  memory_cap)  # MODEL CAP [START MAX SECONDS]: the memory-cap sweep of one model at one cap on the
               # GPUs visible: stock XLA, tf_ucudnn at auto with and without XLA, then tf_ucudnn
               # at 64 MiB and stock TF (one JSON each, saved after every run);
               # MEMCAP_RUNS="MODES [LIMITS];..." runs those instead; MEMCAP_PRECISION=P
               # (mixed_bfloat16, mixed_float16) trains in P, its name added to the files';
               # UCUDNN_DEBUG_OUTPUT=1 keeps each run's plans in its JSON (ucudnn_log);
               # MEMCAP_TAG=T adds _T to the files' names (e.g. for a run under other XLA_FLAGS);
               # MEMCAP_PROCESSES=K: K processes per N, medians (--runs); MEMCAP_STEPS=S timed
               # steps per epoch; MEMCAP_WORKER_TIMEOUT=s per process (default 240; stock XLA's
               # first step at high resolution takes 170 s and more); MEMCAP_PIPELINE="OPTIONS"
               # adds the input pipeline's options (--steps-per-execution K,
               # --prefetch-to-device; name the files apart with MEMCAP_TAG)
    model=$2; cap=$3; start=${4:-32}; max=${5:-512}; budget=${6:-540}; t0=$SECONDS
    precision=${MEMCAP_PRECISION:-float32}
    common=(--models "$model" --caps "$cap" --start-batch "$start" --max-batch "$max"
            --bisect-steps 1 --worker-timeout "${MEMCAP_WORKER_TIMEOUT:-240}"
            --precision "$precision" --runs "${MEMCAP_PROCESSES:-1}"
            ${MEMCAP_STEPS:+--steps-per-epoch "$MEMCAP_STEPS"} ${MEMCAP_PIPELINE:-})
    IFS=';' read -ra runs <<< "${MEMCAP_RUNS:-stock-xla;ucudnn,ucudnn-xla auto;ucudnn 64MiB;stock}"
    for run in "${runs[@]}"; do
      set -- $run; left=$((budget - (SECONDS - t0)))
      [ "$left" -gt 60 ] || { echo "memory_cap $model: no time left for $run" >&2; break; }
      name="memcap_${model}_${cap}_${1//,/+}${2:+_$2}"
      [ "$precision" = float32 ] || name+="_$precision"
      name+="${MEMCAP_TAG:+_$MEMCAP_TAG}"
      timeout "$left" bash "$SCRIPT" bench memory-cap "${common[@]}" --modes "$1" ${2:+--limits "$2"} \
        --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
    done ;;
  fit_profile)  # where a capped model.fit step goes: MODEL MODE N [fit_profile.py's options]
                # (TF's profiler; CUPTI: cupti_on_path)
    cupti_on_path
    log="$OUT/fit_profile_$2_$3_n$4.log"
    timeout 560 python3 benchmarks/fit_profile.py "${@:2}" 2>&1 | grep -v "WARNING\|^I0000\|^W0000" \
      | tee "$log" ;;
  memory_cap_gpus)  # CAP SECONDS CELL...: memory_cap of several cells at once, the i-th on the
                    # i-th GPU (0, 1, ...; of GPUS where it names them); the JSON, logs and
                    # figures of all in one tarball. CELL:
                    # MODEL[:START[:MAX[:CAP[:PRECISION]]]][=RUNS][@DIR], where CAP, PRECISION
                    # and RUNS (MEMCAP_RUNS' form, quoted) replace CAP, MEMCAP_PRECISION and
                    # MEMCAP_RUNS for that cell, e.g. "unet:8=stock-xla"; @DIR runs the cell
                    # with the tf_ucudnn of DIR (an older checkout, see compare), its files
                    # tagged with DIR's name and its own benchmark database, e.g.
                    # "vgg16:32:512@/tmp/old" beside "vgg16:32:512"
    cap=$2; budget=$3; i=0
    for cell in "${@:4}"; do
      dir=; [[ $cell == *@* ]] && { dir=${cell##*@}; cell=${cell%@*}; }
      runs=${MEMCAP_RUNS:-}; [[ $cell == *=* ]] && runs=${cell#*=}
      IFS=: read -r model start max cell_cap precision <<< "${cell%%=*}"
      args=(memory_cap "$model" "${cell_cap:-$cap}" "${start:-32}" "${max:-512}" "$budget")
      if [ -n "$dir" ]; then
        CUDA_VISIBLE_DEVICES=$(gpu $i) MEMCAP_RUNS=$runs \
          MEMCAP_PRECISION=${precision:-${MEMCAP_PRECISION:-float32}} \
          MEMCAP_TAG=${MEMCAP_TAG:+${MEMCAP_TAG}_}$(basename "$dir") with_checkout "$dir" "${args[@]}" &
      else
        CUDA_VISIBLE_DEVICES=$(gpu $i) MEMCAP_RUNS=$runs \
          MEMCAP_PRECISION=${precision:-${MEMCAP_PRECISION:-float32}} bash "$SCRIPT" "${args[@]}" &
      fi
      i=$((i + 1))
    done
    wait
    tail -n 12 "$OUT"/memcap_*.log
    (cd "$OUT" && tar czf "memcap_$cap.tgz" memcap_*.json memcap_*.log memcap_*.png 2>/dev/null \
      && rm -f memcap_*.json memcap_*.log memcap_*.png) ;;
  new_batch_size)  # MODEL [--xla]: N = 128 cold then 100 in the same process, 100 in a new
                   # process with that database, 100 cold (benchmarks/new_batch_size.py)
    model=$2; xla=${3:-}; db=/tmp/new_batch_size_$model.sqlite3; rm -f "$db"
    log="$OUT/new_batch_size_${model}${xla:+_xla}.log"
    for run in "$db 128,100" "$db 100" "off 100"; do
      read -r database batches <<< "$run"
      UCUDNN_DATABASE=$database timeout 500 python3 benchmarks/new_batch_size.py "$model" \
        --batches "$batches" $xla 2>&1 | grep '^{' | tee -a "$log"
    done ;;
  plan_spread)  # MODEL BATCH [PROCESSES] [--xla] [--without-retime]: plans and steps of fresh
                # processes, stock in the same run (benchmarks/plan_spread.py)
    flags="${*:5}"; name="plan_spread_$2_$3${4:+_$4}"
    [[ $flags == *--xla* ]] && name+="_xla"
    [[ $flags == *--without-retime* ]] && name+="_retime_off"
    timeout "${PLAN_SPREAD_SECONDS:-580}" python3 benchmarks/plan_spread.py "$2" "$3" \
      --processes "${4:-5}" "${@:5}" --json "$OUT/$name.json" 2>&1 | grep -v "^[IWE]0000" \
      | tee "$OUT/$name.log" ;;
esac
