#!/bin/bash
# Runs one measurement of docs/benchmarks.md on a GPU machine, from the repository root:
#
#   bash benchmarks/gpu_session.sh MODE [ARGS...]      (OUT=DIR: where results go, default ./gpu_out)
#
# The machine needs Linux x86_64 with an NVIDIA GPU and cuDNN 9, and `python3` with TensorFlow 2.21
# and this checkout's op library built (make build, then run from this checkout) or tf_ucudnn
# installed from its wheel. GPU_ENV=FILE: a shell file sourced first, e.g. one that activates that
# Python's environment. Wheels in .whl/ (highspy, Workspace Division's solver; CUPTI for the
# profiles) are installed into /tmp/site first. GPUS=A,B: the two GPUs that two-GPU modes use
# (default 0,1). The committed results are in docs/results/<experiment>/ under the names below
# with _h200 (the GPU) added; benchmarks/README.md lists what each mode answers.
#
# MODE: setup|tests|tests_split|tests_four|wheel_tests|memory_cap|memory_cap_gpus|new_batch_size|new_size_profile|new_size_check|gated_check|gated_profile|plan_spread|spread_xla|spread_rest|retime_check|tests_two_gpus|relu_check|tests_but_xla|xla_tests|graph|layout_tests|deepbench|deepbench_eager|
#       deepbench_eager_half|deepbench_dtype|misses|exhaustive|speakerid|transposed|stock_engine|
#       engine_table|pass_times|pass_gpu|stem_channels|models|models_layout|models_targets|
#       model_planning|step_profile|wd_vs_wr|planning|planning_profile|overhead|overhead_legacy|
#       overhead_graph|op_overhead|xla_models|xla_pair|xla_pair_beside_tests|xla_pad|xla_bias|
#       xla_workspace|xla_search|xla_memory|xla_profile
set -u
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
echo "gpu_session.sh ${1:-}: results in $OUT/" >&2
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
# DeepBench's layer set in two halves, for runs that exceed one device call's 10 minutes.
DEEPBENCH_A=ocr_08_3x3,ocr_09_3x3,ocr_10_3x3,ocr_11_3x3,facerec_12_3x3,facerec_13_3x3,facerec_14_3x3,facerec_15_3x3,facerec_16_3x3,vision_17_3x3,vision_18_3x3,vision_19_3x3,vision_20_3x3,vision_21_3x3,vision_22_3x3
DEEPBENCH_B=vision_30_5x5,vision_32_5x5,vision_35_5x5,facerec_36_3x3,facerec_38_3x3,facerec_41_3x3,speakerid_54_5x5,speakerid_55_3x3,speakerid_56_5x5,speakerid_57_3x3,speakerid_58_5x5,speakerid_59_3x3,speakerid_60_5x5,speakerid_61_3x3
# The files of ./tests in two halves, for the GPU suite on two GPUs: first (test_bench.py to
# test_plans.py, but test_graph_engines.py) or second (the rest). On an H200 the first half
# with test_graph_engines.py took over 570 s, the second 220-285 s.
suite_half() { ls tests/test_*.py | awk -F/ -v half="$1" \
                 '(half == "first") == ($NF <= "test_plans.py" && $NF != "test_graph_engines.py")'; }
split_run() {  # SECONDS [whole] FILES...: the GPU tests of FILES (with `whole`, every test:
               # test_xla.py's unmarked cases take the custom calls' GPU path on a GPU); failures
               # keep their messages; a test stuck for 240 s prints every thread's stack
  local mark=(-m gpu); [ "$2" = whole ] && { mark=(); set -- "$1" "${@:3}"; }
  timeout "$1" python3 -m pytest "${@:2}" "${mark[@]}" -q -rf -p no:cacheprovider \
    --durations=40 -o faulthandler_timeout=240 2>&1 | grep -v "^I0000\|^W0000" | tail -200
}
old_checkout() {  # OLD_SO: a copy of this checkout in /tmp/old_checkout with OLD_SO as its op
                 # library; or OLD_DIR: a folder of an older checkout's tf_ucudnn/ (its op
                 # library built), benchmarks/ and tests/, copied there whole
  rm -rf /tmp/old_checkout && mkdir -p /tmp/old_checkout
  if [ -d "$1" ]; then
    cp -r "$1"/. /tmp/old_checkout/
    return
  fi
  local so; so=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
  tar --exclude=./.gpu --exclude='./bazel-*' -cf - . | tar -xf - -C /tmp/old_checkout
  cp "$so" /tmp/old_checkout/tf_ucudnn/_ucudnn_ops.so
}
profile_new_size() {  # MODEL SUFFIX [SECONDS]: N = 128 then 100 in one process with
                      # UCUDNN_DEBUG_OUTPUT; the N = 100 kernels summed by planning_profile.py
  rm -f "/tmp/profile_$2.sqlite3"
  UCUDNN_DATABASE="/tmp/profile_$2.sqlite3" UCUDNN_DEBUG_OUTPUT=1 timeout "${3:-150}" \
    python3 benchmarks/new_batch_size.py "$1" --batches 128,100 \
    2> "/tmp/debug_$2.log" > "$OUT/new_size_profile_$1$2.log"
  awk '/benchmarked .* N=100 /{on=1} on' "/tmp/debug_$2.log" > "/tmp/debug_100$2.log"
  python3 benchmarks/planning_profile.py "/tmp/debug_100$2.log" >> "$OUT/new_size_profile_$1$2.log" 2>&1
  gzip -c "/tmp/debug_$2.log" > "$OUT/new_size_debug_$1$2.log.gz"
}
spread_until() {  # END MARGIN ARGS...: plan_spread ARGS, cut at END (in $SECONDS), starting no
                  # round of processes that would end later than MARGIN s before it
  local end=$1 margin=$2; shift 2
  PLAN_SPREAD_SECONDS=$((end - SECONDS)) bash "$0" plan_spread "$@" \
    --seconds $((end - SECONDS - margin))
}
case "$1" in
  setup) nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpus.txt" ;;
  tests) timeout "${2:-540}" python3 -m pytest tests -m gpu -q -rf -p no:cacheprovider 2>&1 \
            | grep -v "^E    \|^I0000\|^W0000" | tail -80 | tee "$OUT/gpu_tests.log" ;;
  tests_split)  # [SECONDS] the checkout's whole GPU suite (test_xla.py too) on two GPUs in one
                # device call, split as wheel_tests splits it; failures keep their messages
    CUDA_VISIBLE_DEVICES=$(gpu 0) split_run "${2:-560}" $(suite_half first) > "$OUT/gpu_tests_first.log" &
    CUDA_VISIBLE_DEVICES=$(gpu 1) split_run "${2:-560}" $(suite_half second) > "$OUT/gpu_tests_second.log" &
    wait; tail -n 3 "$OUT"/gpu_tests_{first,second}.log ;;
  tests_four)  # [SECONDS] the checkout's whole GPU suite on four GPUs in one device call (on
               # H100s the two halves of tests_split take more than one call each): the
               # graph-engine tests; the XLA, batch-size and determinism tests; the workspace
               # fallback and rewrite tests; the rest; then the two-GPU tests on the second and
               # third GPU once their parts end. test_xla.py runs whole (its unmarked cases take
               # the custom calls' GPU path where there is a GPU), the rest with -m gpu. One log
               # per part, failures with their messages
    limit=${2:-560}; t0=$SECONDS
    p0="tests/test_graph_engines.py"
    p1="tests/test_batch_sizes.py tests/test_determinism.py"
    p2="tests/test_workspace_fallback.py tests/test_rewrite.py"
    two="tests/test_multi_gpu.py tests/test_benchmark_devices.py"
    p3=$(ls tests/test_*.py | grep -vxF -f <(tr ' ' '\n' <<< "$p0 $p1 $p2 $two tests/test_xla.py"))
    CUDA_VISIBLE_DEVICES=$(gpu 0) split_run "$limit" $p0 > "$OUT/gpu_tests_part0.log" &
    CUDA_VISIBLE_DEVICES=$(gpu 3) split_run "$limit" $p3 > "$OUT/gpu_tests_part3.log" &
    { { CUDA_VISIBLE_DEVICES=$(gpu 1) split_run "$limit" whole tests/test_xla.py
        CUDA_VISIBLE_DEVICES=$(gpu 1) split_run $((limit - (SECONDS - t0))) $p1; } \
        > "$OUT/gpu_tests_part1.log" &
      CUDA_VISIBLE_DEVICES=$(gpu 2) split_run "$limit" $p2 > "$OUT/gpu_tests_part2.log" &
      wait
      CUDA_VISIBLE_DEVICES=$(gpu 1),$(gpu 2) split_run $((limit - (SECONDS - t0))) $two \
        > "$OUT/gpu_tests_two_gpus.log"; } &
    wait; tail -n 2 "$OUT"/gpu_tests_*.log ;;
  wheel_tests)  # [SECONDS] [all|first|second]: the GPU suite against tf_ucudnn installed from
                # dist/*.whl (make wheel), run outside the checkout. `first` and `second` are
                # suite_half's halves; `all` with two GPUs runs them one per GPU. A test
                # stuck for 240 s prints every thread's stack (pytest's faulthandler_timeout).
    limit=${2:-560}; part=${3:-all}; site=/tmp/wheel_site_$part; dir=/tmp/wheel_tests_$part
    rm -rf "$site" "$dir" && mkdir -p "$dir"
    python3 -m pip install -q --no-index --no-deps --target "$site" dist/*.whl || exit 1
    cp -r tests "$dir/" && grep -v '^pythonpath' pytest.ini > "$dir/pytest.ini"
    PYTHONPATH=$site:$(echo "$PYTHONPATH" | tr ':' '\n' | grep -vx "$PWD" | paste -sd:)
    cd "$dir"
    python3 -c "import tf_ucudnn, os; print('tf_ucudnn from', os.path.dirname(tf_ucudnn.__file__))" \
      | tee "$OUT/wheel_tests_$part.log"
    second=$(suite_half second); first=$(suite_half first)
    run() { timeout "$limit" python3 -m pytest "$@" -m gpu -q -rf -p no:cacheprovider \
              -o faulthandler_timeout=240 2>&1 | grep -v "^E    \|^I0000\|^W0000" | tail -150; }
    case $part in
      first) run $first >> "$OUT/wheel_tests_$part.log" ;;
      second) run $second >> "$OUT/wheel_tests_$part.log" ;;
      *) if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
           CUDA_VISIBLE_DEVICES=$(gpu 0) run $first > "$OUT/wheel_tests_first.log" &
           CUDA_VISIBLE_DEVICES=$(gpu 1) run $second > "$OUT/wheel_tests_second.log" &
           wait
         else
           run tests >> "$OUT/wheel_tests_all.log"
         fi ;;
    esac
    tail -n 15 "$OUT"/wheel_tests_*.log ;;
  memory_cap)  # MODEL CAP [START MAX SECONDS]: the memory-cap sweep of one model at one cap on the
               # GPUs visible: stock XLA, tf_ucudnn at auto with and without XLA, then tf_ucudnn
               # at 64 MiB and stock TF (one JSON each, saved after every run);
               # MEMCAP_RUNS="MODES [LIMITS];..." runs those instead; MEMCAP_PRECISION=P
               # (mixed_bfloat16, mixed_float16) trains in P, its name added to the files';
               # UCUDNN_DEBUG_OUTPUT=1 keeps each run's plans in its JSON (ucudnn_log);
               # MEMCAP_TAG=T adds _T to the files' names (e.g. for a run under other XLA_FLAGS);
               # MEMCAP_PROCESSES=K: K processes per N, medians (--runs); MEMCAP_STEPS=S timed
               # steps per epoch; MEMCAP_WORKER_TIMEOUT=s per process (default 240; stock XLA's
               # first step at high resolution takes 170 s and more)
    model=$2; cap=$3; start=${4:-32}; max=${5:-512}; budget=${6:-540}; t0=$SECONDS
    precision=${MEMCAP_PRECISION:-float32}
    common=(--models "$model" --memory-cap "$cap" --start-batch "$start" --max-batch "$max"
            --bisect-steps 1 --worker-timeout "${MEMCAP_WORKER_TIMEOUT:-240}"
            --precision "$precision" --runs "${MEMCAP_PROCESSES:-1}"
            ${MEMCAP_STEPS:+--steps-per-epoch "$MEMCAP_STEPS"})
    IFS=';' read -ra runs <<< "${MEMCAP_RUNS:-stock-xla;ucudnn,ucudnn-xla auto;ucudnn 64MiB;stock}"
    for run in "${runs[@]}"; do
      set -- $run; left=$((budget - (SECONDS - t0)))
      [ "$left" -gt 60 ] || { echo "memory_cap $model: no time left for $run" >&2; break; }
      name="memcap_${model}_${cap}_${1//,/+}${2:+_$2}"
      [ "$precision" = float32 ] || name+="_$precision"
      name+="${MEMCAP_TAG:+_$MEMCAP_TAG}"
      timeout "$left" python3 -m tf_ucudnn.bench "${common[@]}" --modes "$1" ${2:+--limits "$2"} \
        --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
    done ;;
  memory_cap_gpus)  # CAP SECONDS CELL...: memory_cap of several cells at once, the i-th on the
                    # i-th GPU (0, 1, ...; of GPUS where it names them); the JSON, logs and
                    # figures of all in one tarball (a call returns at most 8 files). CELL:
                    # MODEL[:START[:MAX[:CAP[:PRECISION]]]][=RUNS], where CAP, PRECISION and
                    # RUNS (MEMCAP_RUNS' form, quoted) replace CAP, MEMCAP_PRECISION and
                    # MEMCAP_RUNS for that cell, e.g. "unet:8=stock-xla"
    cap=$2; budget=$3; i=0
    for cell in "${@:4}"; do
      runs=${MEMCAP_RUNS:-}; [[ $cell == *=* ]] && runs=${cell#*=}
      IFS=: read -r model start max cell_cap precision <<< "${cell%%=*}"
      CUDA_VISIBLE_DEVICES=$(gpu $i) MEMCAP_RUNS=$runs \
        MEMCAP_PRECISION=${precision:-${MEMCAP_PRECISION:-float32}} bash "$0" memory_cap \
        "$model" "${cell_cap:-$cap}" "${start:-32}" "${max:-512}" "$budget" &
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
  retime_check)  # A|B on two GPUs, one device call each: re-timing near the best and the
                 # neighbour candidates. A: GPU 0 their tests, then new_batch_size resnet50;
                 # GPU 1 plan_spread vgg16 64 5 --without-retime. B: GPU 0 plan_spread resnet50
                 # 128 5 --without-retime; GPU 1 new_batch_size inceptionv3, then resnet50 --xla.
    case "${2:-A}" in
      A) (export CUDA_VISIBLE_DEVICES=$(gpu 0)
          timeout 200 python3 -m pytest tests/test_graph_engines.py tests/test_batch_sizes.py \
            -m gpu -q -rf -p no:cacheprovider 2>&1 | grep -v "^I0000\|^W0000" | tail -40 \
            | tee "$OUT/retime_tests.log"
          timeout 360 bash "$0" new_batch_size resnet50) &
         CUDA_VISIBLE_DEVICES=$(gpu 1) PLAN_SPREAD_SECONDS=570 bash "$0" plan_spread vgg16 64 5 \
           --without-retime &
         wait ;;
      B) CUDA_VISIBLE_DEVICES=$(gpu 0) PLAN_SPREAD_SECONDS=570 bash "$0" plan_spread resnet50 128 5 \
           --without-retime &
         (export CUDA_VISIBLE_DEVICES=$(gpu 1); timeout 250 bash "$0" new_batch_size inceptionv3
          timeout 300 bash "$0" new_batch_size resnet50 --xla) &
         wait ;;
    esac ;;
  new_size_profile)  # two GPUs, one device call: GPU 0 the GPU suite but XLA; GPU 1 where a
                     # new size's planning goes (new_batch_size.py's first process, N = 128 then
                     # 100, with UCUDNN_DEBUG_OUTPUT; the N = 100 kernels summed by
                     # planning_profile.py) for ResNet-50 and InceptionV3, then the XLA tests
    CUDA_VISIBLE_DEVICES=$(gpu 0) bash "$0" tests_but_xla 560 &
    (export CUDA_VISIBLE_DEVICES=$(gpu 1)
     for model in resnet50 inceptionv3; do
       profile_new_size "$model" "" 200; cat "$OUT/new_size_profile_$model.log"
     done
     bash "$0" xla_tests 250) &
    wait ;;
  new_size_check)  # A|B on two GPUs, one device call each: a new size timing the neighbours'
                   # Pareto fronts without re-timing. A: GPU 0 new_batch_size resnet50, then
                   # --xla; GPU 1 the GPU tests of the stored tables, the transposed graph-engine
                   # test and the memory-cap auto test, then new_batch_size inceptionv3.
                   # B: GPU 0 new_batch_size inceptionv3 --xla; GPU 1 the transposed and
                   # workspace-fallback GPU tests (A's cut them), then plan_spread vgg16 64 3.
                   # C: plan_spread resnet50 128 3 on GPU 0, vgg16 64 3 --xla on GPU 1.
    case "${2:-A}" in
      A) (export CUDA_VISIBLE_DEVICES=$(gpu 0)
          timeout 260 bash "$0" new_batch_size resnet50
          timeout 320 bash "$0" new_batch_size resnet50 --xla) &
         (export CUDA_VISIBLE_DEVICES=$(gpu 1)
          timeout 260 python3 -m pytest tests/test_batch_sizes.py tests/test_database.py \
            tests/test_workspace_fallback.py -m gpu -q -rf -p no:cacheprovider \
            "tests/test_graph_engines.py::GraphEnginesGpuTest::test_transposed_graph_engines_match_tensorflow_for_every_plan" \
            2>&1 | grep -v "^I0000\|^W0000" | tail -60 | tee "$OUT/new_size_tests.log"
          timeout 300 bash "$0" new_batch_size inceptionv3) &
         wait ;;
      B) CUDA_VISIBLE_DEVICES=$(gpu 0) timeout 545 bash "$0" new_batch_size inceptionv3 --xla &
         (export CUDA_VISIBLE_DEVICES=$(gpu 1)
          timeout 300 python3 -m pytest tests/test_workspace_fallback.py -m gpu -v -rf \
            -p no:cacheprovider \
            "tests/test_graph_engines.py::GraphEnginesGpuTest::test_transposed_graph_engines_match_tensorflow_for_every_plan" \
            2>&1 | grep -v "^I0000\|^W0000" | tail -60 | tee "$OUT/new_size_tests_b.log"
          PLAN_SPREAD_SECONDS=235 bash "$0" plan_spread vgg16 64 3 --seconds 200) &
         wait ;;
      C) CUDA_VISIBLE_DEVICES=$(gpu 0) PLAN_SPREAD_SECONDS=285 bash "$0" plan_spread resnet50 128 3 \
           --seconds 220 &
         CUDA_VISIBLE_DEVICES=$(gpu 1) PLAN_SPREAD_SECONDS=285 bash "$0" plan_spread vgg16 64 3 --xla \
           --seconds 220 &
         wait ;;
    esac ;;
  gated_check)  # OLD_SO [MODEL N]: timing behind a StreamGate against OLD_SO (an op library
                # timing from an idle GPU), side by side on two GPUs, GPU 0 this checkout's op
                # library, GPU 1 a copy of the checkout with OLD_SO: where a new size's planning
                # goes (new_size_profile's run, screening excess), then plan_spread K = 5
    old_checkout "$2"; model=${3:-resnet50}; n=${4:-128}
    profile_and_spread() {  # SUFFIX: in the current checkout
      profile_new_size "$model" "$1"
      timeout 420 python3 benchmarks/plan_spread.py "$model" "$n" --processes 5 --seconds 390 \
        --json "$OUT/plan_spread_${model}_${n}$1.json" 2>&1 | grep -v "^[IWE]0000" \
        > "$OUT/plan_spread_${model}_${n}$1.log"
    }
    (export CUDA_VISIBLE_DEVICES=$(gpu 0); profile_and_spread "") &
    (cd /tmp/old_checkout && export CUDA_VISIBLE_DEVICES=$(gpu 1) PYTHONPATH=/tmp/old_checkout:${PYTHONPATH:-}
     profile_and_spread _old) &
    wait; tail -n 4 "$OUT"/*.log ;;
  gated_profile)  # OLD_SO: new_size_profile's ResNet-50 run, GPU 0 with this checkout's op
                  # library, then the re-timing GPU test; GPU 1 with OLD_SO
    old_checkout "$2"
    (export CUDA_VISIBLE_DEVICES=$(gpu 0); profile_new_size resnet50 ""
     timeout 70 python3 -m pytest tests/test_graph_engines.py -m gpu -q -rf -p no:cacheprovider \
       -k timed_again 2>&1 | grep -v "^I0000\|^W0000" | tail -40 > "$OUT/retime_test.log") &
    (cd /tmp/old_checkout && export CUDA_VISIBLE_DEVICES=$(gpu 1) PYTHONPATH=/tmp/old_checkout:${PYTHONPATH:-}
     profile_new_size resnet50 _old) &
    wait; tail -n 4 "$OUT"/*.log ;;
  spread_xla)  # [SECONDS] plan_spread under XLA on two GPUs in one device call: GPU 0 VGG-16
               # N=64, then VGG-16 without XLA in the time left; GPU 1 ResNet-50 N=128. Rounds
               # of processes stop in time to write their JSON.
    end=$((SECONDS + ${2:-570}))
    (export CUDA_VISIBLE_DEVICES=$(gpu 0)
     spread_until "$end" 60 vgg16 64 5 --xla
     if [ $((end - SECONDS)) -gt 150 ]; then spread_until "$end" 40 vgg16 64 5; fi) &
    CUDA_VISIBLE_DEVICES=$(gpu 1) spread_until "$end" 70 resnet50 128 5 --xla &
    wait ;;
  relu_check)  # OLD_DIR: the ReLU epilogue. GPU 0 with this checkout's op library: the
               # bias and ReLU tests of test_nn, test_graph_engines, test_xla, test_layers and
               # test_rewrite on the GPU, then VGG-16's steps; GPU 1 the same steps with
               # OLD_DIR (a checkout before the ReLU epilogue, see old_checkout): stock XLA
               # against tf_ucudnn under XLA (float32), stock TF against the rewrite
               # (mixed_float16, where stock fuses conv + bias + ReLU); one database each
    old_checkout "$2"
    relu_steps() {  # SUFFIX: the two step runs, in a folder of their own (the two sides' runs
                    # write the same names), their logs moved to $OUT with SUFFIX
      local dir=/tmp/relu_steps$1; mkdir -p "$dir"
      OUT=$dir timeout 150 bash "$0" xla_pair vgg16 float32 140 > /dev/null
      OUT=$dir timeout 180 bash "$0" models_targets vgg16 mixed_float16 170 stock,rewrite > /dev/null
      mv "$dir/xla_pair_vgg16_float32.log" "$OUT/relu_xla_pair_vgg16$1.log"
      mv "$dir/models_targets_vgg16_mixed_float16.log" "$OUT/relu_models_vgg16_mixed_float16$1.log"
    }
    (export CUDA_VISIBLE_DEVICES=$(gpu 0) UCUDNN_DATABASE=/tmp/relu_new.sqlite3
     timeout 200 python3 -m pytest tests/test_nn.py tests/test_graph_engines.py tests/test_xla.py \
       tests/test_layers.py tests/test_rewrite.py -q -rf -p no:cacheprovider \
       -k "relu or bias or graph_engines_alone or transposed_graph_engines or fused" 2>&1 \
       | grep -v "^I0000\|^W0000" \
       | tail -60 > "$OUT/relu_tests.log"
     relu_steps "") &
    (cd /tmp/old_checkout && export CUDA_VISIBLE_DEVICES=$(gpu 1) UCUDNN_DATABASE=/tmp/relu_old.sqlite3 \
       PYTHONPATH=/tmp/old_checkout:${PYTHONPATH:-}
     sleep 120; relu_steps _old) &
    wait; tail -n 3 "$OUT"/relu_tests.log; tail -n 6 "$OUT"/relu_*vgg16*.log ;;
  spread_rest)  # [SECONDS] the plan_spread cells spread_xla leaves in one device call: GPU 0
                # VGG-16 N=64 without XLA, K = 5; GPU 1 ResNet-50 N=128 under XLA, the 3
                # processes that fit (pool them with spread_xla's by plan_spread.py --summarize
                # A.json B.json)
    end=$((SECONDS + ${2:-570}))
    CUDA_VISIBLE_DEVICES=$(gpu 0) spread_until "$end" 40 vgg16 64 5 &
    CUDA_VISIBLE_DEVICES=$(gpu 1) spread_until "$end" 70 resnet50 128 3 --xla &
    wait ;;
  tests_two_gpus)  # [SECONDS] the tests that need two GPUs (skipped by tests_split, whose halves
                   # see one GPU each), both GPUs visible; then new_size_profile's ResNet-50 run
                   # on GPU 0, whose debug output counts the gates that opened by themselves
    timeout "${2:-300}" python3 -m pytest tests/test_multi_gpu.py tests/test_benchmark_devices.py \
      -m gpu -q -rfs -p no:cacheprovider --durations=10 2>&1 \
      | grep -v "^I0000\|^W0000" | tail -60 > "$OUT/gpu_tests_two_gpus.log"
    (export CUDA_VISIBLE_DEVICES=$(gpu 0); profile_new_size resnet50 "" 150)
    tail -n 3 "$OUT/gpu_tests_two_gpus.log"; tail -n 12 "$OUT/new_size_profile_resnet50.log" ;;
  tests_but_xla)  # the GPU suite without tests/test_xla.py (run that with xla_tests): the whole
                  # suite no longer fits one device call of 10 minutes
    timeout "${2:-560}" python3 -m pytest tests -m gpu -q -rf -p no:cacheprovider \
      --ignore tests/test_xla.py 2>&1 | grep -v "^E    \|^I0000\|^W0000" | tail -80 \
      | tee "$OUT/gpu_tests_but_xla.log" ;;
  models) timeout "${2:-580}" python3 -m tf_ucudnn.bench --models vgg16,alexnet,resnet18 \
            --limits 64MiB --totals 256MiB --planning --json "$OUT/models.json" 2>&1 | tee "$OUT/models.log" ;;
  deepbench) timeout "${2:-580}" python3 -m tf_ucudnn.bench --set deepbench --limits 64MiB,256MiB \
            --iters 5 --json "$OUT/deepbench.json" 2>&1 | tee "$OUT/deepbench.log" ;;
  deepbench_eager)  # the same with every CUDA module loaded at start: stock TF's autotuner
                    # then no longer times first (module-loading) runs of its candidates
    CUDA_MODULE_LOADING=EAGER timeout "${2:-900}" python3 -m tf_ucudnn.bench --set deepbench \
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
    CUDA_MODULE_LOADING=EAGER timeout "${3:-560}" python3 -m tf_ucudnn.bench --set deepbench \
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
    CUDA_MODULE_LOADING=EAGER timeout "${5:-560}" python3 -m tf_ucudnn.bench --set deepbench \
      --limits "${4:-64MiB}" --iters "${6:-5}" --dtype "$2" --layers "$layers" \
      --json "$OUT/deepbench_$2_$tag.json" --png "/tmp/figures/deepbench_$2_$tag" 2>&1 \
      | grep -v WARNING | tee "$OUT/deepbench_$2_$tag.log" ;;
  layout_tests)  # enable_rewrite keeps the model's layout (NHWC, no layout-optimizer transposes)
    timeout "${2:-300}" python3 -m pytest tests/test_rewrite.py -m gpu -q -p no:cacheprovider -rf 2>&1 \
      | tail -30 | tee "$OUT/layout_tests.log" ;;
  models_layout)  # without XLA: stock TF at 8 GiB and 64 MiB, the rewrite at 64 MiB in the model's
                  # layout and with the layout optimizer on: MODELS [PRECISION]
    timeout "${4:-560}" python3 -m tf_ucudnn.bench --models "${2:-vgg16,resnet50}" --limits 64MiB \
      --modes stock,rewrite,rewrite-layout --precision "${3:-float32}" \
      --json "$OUT/models_layout_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/models_layout_${3:-float32}.log" ;;
  overhead) timeout "${2:-570}" python3 -m tf_ucudnn.bench --set deepbench --overhead --iters 20 \
            --json "$OUT/overhead.json" 2>&1 | tee "$OUT/overhead.log" ;;
  overhead_legacy)  # the 29-layer table under the conditions of the first one (legacy
                   # algorithms only: a plan's search is one cudnnFind per pass), then the
                   # graph-engine layers (overhead_graph), in one call
    UCUDNN_ENGINES=legacy timeout "${2:-300}" python3 -m tf_ucudnn.bench --set deepbench \
      --overhead --iters 20 --json "$OUT/overhead_legacy.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/overhead_legacy.log"
    bash "$0" overhead_graph "${3:-240}" ;;
  models_targets)  # whole training steps of MODEL [PRECISION]: stock TF at 8 GiB and
                   # 64 MiB, the rewrite at 64 MiB (and with the layout optimizer on, for
                   # float32), and the first step cold and with a warm benchmark database
    # [TIMEOUT] [MODES]: MODES replaces the settings (e.g. stock,rewrite); RUNS=K: K processes
    # per setting and K cold/warm pairs, the table of their medians (first steps vary by seconds)
    modes=stock,rewrite; [ "${3:-float32}" = float32 ] && modes=$modes,rewrite-layout
    modes=${5:-$modes}
    timeout "${4:-560}" python3 -m tf_ucudnn.bench --models "$2" --limits 64MiB --planning \
      --modes "$modes" --precision "${3:-float32}" --runs "${RUNS:-1}" \
      --json "$OUT/models_targets_$2_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/models_targets_$2_${3:-float32}.log" ;;
  overhead_graph)  # the same on five layers whose plans use graph-API engines (direct call:
                   # cudnnBackendExecute with a prebuilt variant pack)
    timeout "${2:-240}" python3 -m tf_ucudnn.bench --set deepbench --overhead --iters 20 \
      --layers facerec_15_3x3,ocr_11_3x3,vision_21_3x3,vision_30_5x5,speakerid_57_3x3 \
      --json "$OUT/overhead_graph.json" 2>&1 | grep -v WARNING | tee "$OUT/overhead_graph.log" ;;
  planning)  # ResNet-18's convolutions at N=256: cold, warm database; cold without a
             # database on one GPU and on every GPU (UCUDNN_BENCHMARK_DEVICES), twice each
    db=$(mktemp -d)/db.sqlite3
    for run in cold warm; do
      echo -n "$run: "; UCUDNN_DATABASE=$db python3 benchmarks/planning_cold_warm.py 2>&1 | tail -1
    done | tee "$OUT/planning.log"
    for devices in "" all "" all; do
      echo -n "no database, UCUDNN_BENCHMARK_DEVICES='$devices': "
      UCUDNN_DATABASE=off UCUDNN_BENCHMARK_DEVICES=$devices \
        python3 benchmarks/planning_cold_warm.py 2>&1 | tail -1
    done | tee -a "$OUT/planning.log" ;;
  planning_profile)  # ResNet-18 cold, no database: graph-engine pruning off (0) and on (2);
                     # the kernels' own cost lines (UCUDNN_DEBUG_OUTPUT) summed
    for f in 0 2; do
      echo "UCUDNN_GRAPH_PRUNE_FACTOR=$f: $(UCUDNN_DATABASE=off UCUDNN_DEBUG_OUTPUT=1 \
        UCUDNN_GRAPH_PRUNE_FACTOR=$f python3 benchmarks/planning_cold_warm.py \
        2> "$OUT/planning_debug_$f.log" | tail -1)"
      python3 benchmarks/planning_profile.py "$OUT/planning_debug_$f.log"
    done 2>&1 | tee "$OUT/planning_profile.log" ;;
  exhaustive)  # UCUDNN_GRAPH_SEARCH=exhaustive: the misses layers, and ResNet-18's planning cost
    export UCUDNN_GRAPH_SEARCH=exhaustive
    timeout "${2:-400}" python3 -m tf_ucudnn.bench --set deepbench --limits 64MiB,256MiB --iters 5 \
      --layers ocr_11_3x3,facerec_12_3x3,facerec_16_3x3,vision_30_5x5,vision_32_5x5,speakerid_54_5x5 \
      --json "$OUT/misses_exhaustive.json" 2>&1 | grep -v WARNING | tee "$OUT/misses_exhaustive.log"
    echo "exhaustive: $(UCUDNN_DATABASE=off UCUDNN_DEBUG_OUTPUT=1 python3 benchmarks/planning_cold_warm.py \
      2> "$OUT/planning_debug_exhaustive.log" | tail -1)" | tee -a "$OUT/misses_exhaustive.log"
    python3 benchmarks/planning_profile.py "$OUT/planning_debug_exhaustive.log" \
      | tee -a "$OUT/misses_exhaustive.log" ;;
  graph) timeout "${2:-540}" python3 -m pytest tests/test_graph_engines.py -m gpu -q -p no:cacheprovider \
            2>&1 | tail -40 | tee "$OUT/graph_tests.log" ;;
  misses)  # the layers where the legacy algorithms could not match stock TF
    timeout "${2:-580}" python3 -m tf_ucudnn.bench --set deepbench --limits 64MiB,256MiB --iters 5 \
      --layers ocr_11_3x3,facerec_12_3x3,facerec_16_3x3,vision_30_5x5,vision_32_5x5,speakerid_54_5x5 \
      --json "$OUT/misses.json" 2>&1 | tee "$OUT/misses.log" ;;
  engine_table) python3 benchmarks/engine_table.py "${@:2}" 2>&1 | grep -v WARNING \
            | tee "$OUT/engine_table.log" ;;
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
  pass_times)  # one layer's passes, stock TF (TF_CUDNN_WORKSPACE_LIMIT_IN_MB=64) against tf_ucudnn
                # at 64 MiB, in one process: TAG [pass_times.py's options]. Every CUDA module
                # loaded at start, as in deepbench_eager: with lazy loading stock TF's autotuner
                # can time its candidates' module-loading first runs (benchmarks.md §2)
    CUDA_MODULE_LOADING=EAGER TF_CUDNN_WORKSPACE_LIMIT_IN_MB=64 timeout 200 \
      python3 benchmarks/pass_times.py "${@:3}" 2>&1 \
      | grep -v "WARNING\|^I0000\|^W0000" | tee "$OUT/pass_times_$2.log" ;;
  pass_gpu)  # wall and GPU kernel time per pass (pass_times.py --profile): TAG DTYPE LAYERS
             # [CALLS] ["STOCK_MIBS"] [TIMEOUT]; stock TF at 64 MiB, then at 8 GiB (default
             # "64 8192"), each against tf_ucudnn at 64 MiB
    export LD_LIBRARY_PATH=/tmp/site/nvidia/cuda_cupti/lib:${LD_LIBRARY_PATH:-}
    for mib in ${6:-64 8192}; do
      CUDA_MODULE_LOADING=EAGER TF_CUDNN_WORKSPACE_LIMIT_IN_MB=$mib timeout "${7:-280}" \
        python3 benchmarks/pass_times.py --profile --dtype "$3" --layers "$4" --calls "${5:-20}" \
        --json "$OUT/pass_gpu_$2_stock$mib.json" 2>&1 \
        | grep -v "WARNING\|^I0000\|^W0000\|^E0000\|^To enable" | tee "$OUT/pass_gpu_$2_stock$mib.log"
    done ;;
  speakerid)  # DeepBench's float32 miss at 64 MiB under UCUDNN_GRAPH_SEARCH=exhaustive: every
              # candidate as timed at each size (no pruning), then the layer against stock TF
    export UCUDNN_GRAPH_SEARCH=exhaustive
    UCUDNN_GRAPH_PRUNE_FACTOR=0 python3 benchmarks/engine_table.py --sizes 256,128,64,32,16,8 2>&1 \
      | grep -v WARNING > "$OUT/speakerid_table.log"
    timeout "${2:-300}" python3 -m tf_ucudnn.bench --set deepbench --limits 64MiB --iters 5 \
      --layers speakerid_54_5x5 --json "$OUT/speakerid.json" 2>&1 | tee "$OUT/speakerid.log" ;;
  transposed)  # transposed graph candidates (UCUDNN_GRAPH_LAYOUTS): their correctness tests,
               # speakerid_54 (whole layer, lazy and eager module loading; backward-data alone,
               # eager) with its candidate table, then ResNet-18's planning cost, all with
               # transposed candidates proposed (the tests set their own value)
    export UCUDNN_GRAPH_LAYOUTS=both
    timeout 400 python3 -m pytest tests/test_graph_engines.py -m gpu -q -p no:cacheprovider \
      -k every_plan 2>&1 | tail -30 | tee "$OUT/transposed_tests.log"
    python3 benchmarks/engine_table.py --sizes 256,64,32,16,8 2>&1 | grep -v WARNING \
      > "$OUT/speakerid_table_transposed.log"
    for loading in LAZY EAGER; do
      CUDA_MODULE_LOADING=$loading timeout 300 python3 -m tf_ucudnn.bench --set deepbench \
        --limits 64MiB --iters 5 --layers speakerid_54_5x5 \
        --json "$OUT/speakerid_transposed_$loading.json" 2>&1 | grep -v WARNING
    done 2>&1 | tee "$OUT/speakerid_transposed.log"
    CUDA_MODULE_LOADING=EAGER timeout 300 python3 -m tf_ucudnn.bench --set deepbench \
      --limits 64MiB --iters 5 --layers speakerid_54_5x5 --passes backward-data 2>&1 \
      | grep -v WARNING | tee -a "$OUT/speakerid_transposed.log"
    bash "$0" planning ;;
  xla_tests)  # the XLA path: every case of tests/test_xla.py on the GPU (custom calls)
    timeout "${2:-300}" python3 -m pytest tests/test_xla.py -q -p no:cacheprovider -x 2>&1 \
      | tail -60 | tee "$OUT/xla_tests.log" ;;
  xla_models)  # one model (default vgg16): stock TF and tf_ucudnn with and without XLA
    timeout "${3:-560}" python3 -m tf_ucudnn.bench --models "${2:-vgg16}" --limits 64MiB --xla \
      --json "$OUT/xla_models_${2:-vgg16}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_models_${2:-vgg16}.log" ;;
  wd_vs_wr)  # Workspace Reuse at T per kernel against Workspace Division of a total T (VGG-16)
    timeout "${2:-300}" python3 -m tf_ucudnn.bench --models vgg16 --limits 64MiB --totals 64MiB \
      --modes rewrite,rewrite-wd --json "$OUT/wd_vs_wr.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/wd_vs_wr.log" ;;
  xla_pair)  # stock XLA against tf_ucudnn under XLA only: MODEL [PRECISION] (RUNS=K: K processes
             # per setting, medians)
    timeout "${4:-400}" python3 -m tf_ucudnn.bench --models "$2" --limits 64MiB --xla \
      --modes stock-xla,ucudnn-xla --precision "${3:-float32}" --runs "${RUNS:-1}" \
      --json "$OUT/xla_pair_$2_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_pair_$2_${3:-float32}.log" ;;
  xla_search)  # UCUDNN_GRAPH_SEARCH under XLA: stock XLA and tf_ucudnn under XLA (default
               # search), then tf_ucudnn with SEARCH: MODEL [PRECISION] [SEARCH] [TIMEOUT];
               # RUNS=K: K processes per setting. The database keeps each search's tables
               # apart (schema 4), so the second run is not seeded from the first.
    timeout "${5:-560}" sh -c "python3 -m tf_ucudnn.bench --models $2 --limits 64MiB --xla \
      --modes stock-xla,ucudnn-xla --precision ${3:-float32} --runs ${RUNS:-1} \
      --json $OUT/xla_search_$2_${3:-float32}.json && UCUDNN_GRAPH_SEARCH=${4:-wide} \
      python3 -m tf_ucudnn.bench --models $2 --limits 64MiB --xla --modes ucudnn-xla \
      --precision ${3:-float32} --runs ${RUNS:-1} \
      --json $OUT/xla_search_$2_${3:-float32}_${4:-wide}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_search_$2_${3:-float32}.log" ;;
  xla_bias)  # what the conv bias and the 64 MiB limit cost under XLA: ResNet-50 with and without
             # its convolutions' biases, stock XLA against tf_ucudnn at 64 MiB; tf_ucudnn at
             # [LIMIT] (default 1GiB) [PRECISION]
    timeout "${4:-560}" sh -c "python3 -m tf_ucudnn.bench --models resnet50,resnet50-nobias \
      --limits 64MiB --xla --modes stock-xla,ucudnn-xla --precision ${3:-float32} \
      --json $OUT/xla_bias_${3:-float32}.json && python3 -m tf_ucudnn.bench --models resnet50 \
      --limits ${2:-1GiB} --xla --modes ucudnn-xla --precision ${3:-float32} \
      --json $OUT/xla_bias_${3:-float32}_${2:-1GiB}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_bias_${3:-float32}.log" ;;
  xla_workspace)  # where an XLA custom call's workspace lives: stock XLA, tf_ucudnn under XLA with
                 # XLA's scratch allocator and with a workspace buffer (UCUDNN_XLA_WORKSPACE=buffer):
                 # MODEL [PRECISION] [TIMEOUT]
    timeout "${4:-560}" python3 -m tf_ucudnn.bench --models "$2" --limits 64MiB --xla \
      --modes stock-xla,ucudnn-xla,ucudnn-xla-buffer --precision "${3:-float32}" \
      --json "$OUT/xla_workspace_$2_${3:-float32}.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_workspace_$2_${3:-float32}.log" ;;
  xla_pair_beside_tests)  # on a short device budget: tests/test_xla.py in the background while
                          # tf_ucudnn under XLA and stock XLA run one after the other, each with
                          # a JSON of its own: MODEL [PRECISION] [TIMEOUT]. Memory growth is on
                          # in every process so that they share the GPU: the peaks compare, the
                          # step times (beside the tests) do not. (Named xla_plan at 843c899.)
    export TF_FORCE_GPU_ALLOW_GROWTH=true
    timeout "${4:-300}" python3 -m pytest tests/test_xla.py -q -p no:cacheprovider -rf 2>&1 \
      | grep --line-buffered -v "^I0000\|^W0000\|^E0000" > "$OUT/xla_tests_beside.log" &
    for mode in ucudnn-xla stock-xla; do
      timeout "${4:-300}" python3 -m tf_ucudnn.bench --models "$2" --limits 64MiB --xla \
        --modes $mode --precision "${3:-float32}" --json "$OUT/xla_beside_$2_${3:-float32}_$mode.json" \
        2>&1 | grep --line-buffered -v WARNING | tee "$OUT/xla_beside_$2_${3:-float32}_$mode.log"
    done
    wait ;;
  xla_memory)  # where an XLA step's memory goes: buffer assignment, cuDNN workspace (dumps)
    timeout "${3:-500}" python3 benchmarks/xla_memory.py "${2:-vgg16}" ${4:-} 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_memory_${2:-vgg16}.log" ;;
  xla_profile)  # where an XLA step's GPU time goes: MODEL [BATCH] [PRECISION] (TF's profiler;
                # CUPTI 12 from the nvidia-cuda-cupti-cu12 wheel sent in .whl)
    export LD_LIBRARY_PATH=/tmp/site/nvidia/cuda_cupti/lib:${LD_LIBRARY_PATH:-}
    timeout "${5:-560}" python3 benchmarks/xla_profile.py "${2:-resnet50}" ${3:-128} "${4:-float32}" \
      2>&1 | grep -v "WARNING\|^I0000\|^W0000" | tee "$OUT/xla_profile_${2:-resnet50}.log" ;;
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
  step_profile)  # the same without XLA: stock TF at 8 GiB against the rewrite at 64 MiB
    export LD_LIBRARY_PATH=/tmp/site/nvidia/cuda_cupti/lib:${LD_LIBRARY_PATH:-}
    timeout "${5:-400}" python3 benchmarks/xla_profile.py "${2:-resnet50}" ${3:-128} "${4:-float32}" \
      stock,rewrite 2>&1 | grep -v "WARNING\|^I0000\|^W0000" \
      | tee "$OUT/step_profile_${2:-resnet50}.log" ;;
  stem_channels)  # ResNet-50's 7x7 stem convolution (230x230, N=128) with 3, 4 and 8 input
                  # channels: stock TF against tf_ucudnn at 64 MiB and 1 GiB: DTYPE [PASSES]
    tag=${2:-float32}$(echo "${3:+_$3}" | tr , _)
    timeout "${4:-280}" python3 -m tf_ucudnn.bench --csv benchmarks/stem_channels.csv --batch 128 \
      --limits 64MiB,1GiB --dtype "${2:-float32}" --passes "${3:-forward,backward-data,backward-filter}" \
      --iters 5 --json "$OUT/stem_channels_$tag.json" 2>&1 \
      | grep -v "WARNING\|^I0000\|^W0000" | tee "$OUT/stem_channels_$tag.log" ;;
  xla_pad)  # half precision's few input channels padded to 8 under XLA (UCUDNN_XLA_PAD_CHANNELS):
            # stock XLA and tf_ucudnn under XLA (padding on, the default), then tf_ucudnn with
            # it off: MODEL [PRECISION] [TIMEOUT]; RUNS=K: K processes per setting
    timeout "${4:-560}" sh -c "python3 -m tf_ucudnn.bench --models $2 --limits 64MiB --xla \
      --modes stock-xla,ucudnn-xla --precision ${3:-mixed_bfloat16} --runs ${RUNS:-1} \
      --json $OUT/xla_pad_$2_${3:-mixed_bfloat16}.json && UCUDNN_XLA_PAD_CHANNELS=off \
      python3 -m tf_ucudnn.bench --models $2 --limits 64MiB --xla --modes ucudnn-xla \
      --precision ${3:-mixed_bfloat16} --runs ${RUNS:-1} \
      --json $OUT/xla_pad_$2_${3:-mixed_bfloat16}_off.json" 2>&1 | grep -v WARNING \
      | tee "$OUT/xla_pad_$2_${3:-mixed_bfloat16}.log" ;;
  op_overhead) timeout "${2:-200}" python3 benchmarks/op_overhead.py "$OUT/op_overhead.json" 2>&1 \
            | grep -v WARNING | tee "$OUT/op_overhead.log" ;;
esac
