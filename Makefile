# tf_ucudnn: one entry point. `make run` = the main job, `make test` = the tests.
# The venv gets the runtime requirements and the development tools
# (requirements.txt, requirements-dev.txt).
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
LIB := tf_ucudnn/_ucudnn_ops.so
# Benchmark-only (tf-ucudnn bench's overhead mode), never in the wheel.
BENCH_LIB := tf_ucudnn/_ucudnn_overhead.so
APT_PACKAGES := bazel-bootstrap libhighwayhash-dev libfarmhash-dev
SRCS := $(shell find cc -name '*.cc' -o -name '*.h') BUILD WORKSPACE build_defs.bzl

.PHONY: setup build build-bench run test test-onednn test-gpu test-gpu-wheel bench wheel wheel-test clean

setup: $(VENV)/.done
$(VENV)/.done: requirements.txt requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	touch $@

.tf_configure.bazelrc: $(VENV)/.done configure.py
	$(VPY) configure.py

build: $(LIB)
$(LIB): .tf_configure.bazelrc $(SRCS)
	@# Bazel, and the highwayhash and farmhash headers that TF's tf2xla headers include.
	@{ command -v bazel >/dev/null && [ -f /usr/include/farmhash.h ] && [ -d /usr/include/highwayhash ]; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Bazel (Debian's bazel-bootstrap) and the highwayhash/farmhash headers"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -q && apt-get install -y -q $(APT_PACKAGES); \
	  else echo "missing build tools: sudo apt-get install $(APT_PACKAGES)"; exit 1; fi; }
	bazel build //:_ucudnn_ops.so
	@# A new file, renamed into place: processes that loaded the old one keep it.
	cp -f bazel-bin/_ucudnn_ops.so $(LIB).tmp && chmod u+w $(LIB).tmp && mv -f $(LIB).tmp $(LIB)

# The execution-overhead measurement (`tf-ucudnn bench` overhead mode), a
# library of its own beside the op library, which it runs through.
build-bench: $(BENCH_LIB)
$(BENCH_LIB): $(LIB)
	bazel build //:_ucudnn_overhead.so
	cp -f bazel-bin/_ucudnn_overhead.so $@.tmp && chmod u+w $@.tmp && mv -f $@.tmp $@

# The C++ tests: no TensorFlow, no GPU.
CC_TESTS := //cc/engine:planner_test //cc/engine:knobs_test //cc/engine:conv_params_test \
  //cc/engine:batch_norm_test //cc/engine:cpu_fusion_test //cc/engine:screening_test \
  //cc/xla:xla_conv_config_test

run: build
	$(VPY) -m tf_ucudnn demo

test: build
	bazel build $(CC_TESTS)
	@for t in $(CC_TESTS); do ./bazel-bin/$$(echo "$${t#//}" | tr : /) || exit 1; done
	$(VPY) -m pytest tests -v -rs

# The CPU suite with TensorFlow's oneDNN forced on and off: oneDNN (on by
# default on Intel CPUs only) renames the stock convolutions after Grappler and
# treats empty inputs its own way, so both settings are covered whatever this CPU is.
test-onednn: build
	TF_ENABLE_ONEDNN_OPTS=1 $(VPY) -m pytest tests -m "not gpu" -q -rs
	TF_ENABLE_ONEDNN_OPTS=0 $(VPY) -m pytest tests -m "not gpu" -q -rs

# The GPU suite, on a machine with a GPU and the op library built (nothing is
# built here): every test marked gpu, and test_xla.py whole. GPUS=0,1,2,3 runs
# it in parts, one per GPU at once, then the tests that need two GPUs on the
# first two (tests/gpu_suite.py); one log per part in GPU_LOGS.
GPUS ?=
GPU_LOGS ?= gpu_out/gpu_tests
GPU_TIMEOUT ?= 3600
GPU_PY ?= $(if $(wildcard $(VPY)),$(VPY),$(PY))
test-gpu:
	$(GPU_PY) tests/gpu_suite.py --gpus "$(GPUS)" --logs $(GPU_LOGS) --timeout $(GPU_TIMEOUT)

# The same against the wheel in dist/ (make wheel), installed without its
# dependencies (this Python's serve) and run from a copy of tests/ outside
# the checkout.
test-gpu-wheel:
	@ls dist/*.whl >/dev/null 2>&1 || { echo "no wheel in dist/: make wheel first"; exit 1; }
	$(GPU_PY) tests/gpu_suite.py --wheel "$$(ls dist/*.whl | head -1)" --gpus "$(GPUS)" \
	  --logs $(GPU_LOGS)_wheel --timeout $(GPU_TIMEOUT)

bench: build
	$(VPY) -m tf_ucudnn bench layers

# The wheel, tagged manylinux by auditwheel: TensorFlow's own libraries are
# excluded (the op library must use the installed TensorFlow's), everything
# else it needs is in every manylinux policy's list (libc, libstdc++, libgcc_s).
wheel: build $(VENV)/.done
	rm -rf build/pip build/wheel-raw dist && mkdir -p build/pip build/wheel-raw dist
	cp pip_package/pyproject.toml pip_package/setup.py README.md LICENSE build/pip/
	cp -r tf_ucudnn build/pip/
	rm -f build/pip/$(BENCH_LIB)
	find build/pip -name __pycache__ -prune -exec rm -rf {} +
	$(VPY) -m pip wheel -q --no-deps -w build/wheel-raw build/pip
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(VENV)/bin/auditwheel repair -w dist \
	  --exclude libtensorflow_framework.so.2 --exclude libtensorflow_cc.so.2 build/wheel-raw/*.whl

# The wheel in a fresh virtual environment, with the test suite run against the
# installed package (not this checkout), its `tf-ucudnn` command included.
wheel-test: wheel
	rm -rf build/wheel-venv build/wheel-tests && mkdir -p build/wheel-tests
	$(PY) -m venv build/wheel-venv
	build/wheel-venv/bin/python -m pip install -q "$$(ls dist/*.whl)[bench]" -r requirements-dev.txt
	cp -r tests build/wheel-tests/
	grep -v '^pythonpath' pytest.ini > build/wheel-tests/pytest.ini
	cd build/wheel-tests && ../wheel-venv/bin/python -c "import tf_ucudnn, os; print('installed:', os.path.dirname(tf_ucudnn.__file__))"
	cd build/wheel-tests && ../wheel-venv/bin/python -m pytest tests -q

clean:
	bazel clean 2>/dev/null || true
	rm -rf $(LIB) $(BENCH_LIB) .tf_configure.bazelrc build dist
