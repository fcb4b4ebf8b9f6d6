"""Repository rule exposing the pip TensorFlow's headers and framework library.

configure.py writes the paths (all taken from tf.sysconfig) into
.tf_configure.bazelrc as --repo_env values; this rule symlinks them into an
external repository so that Bazel can track the headers without copying 430 MB.
"""

_BUILD = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "tf_header_lib",
    hdrs = glob(["include/**"], exclude = ["include/**/*.cc"]),
    includes = [
        "include",
        "include/third_party/gpus/cuda/include",
        "include/third_party/gpus/cudnn/include",
    ],
)

# nlohmann/json (one header), as cudnn-frontend ships it in the wheel.
cc_library(
    name = "nlohmann_json",
    hdrs = ["include/external/cudnn_frontend_archive/include/cudnn_frontend/thirdparty/nlohmann/json.hpp"],
    includes = ["include/external/cudnn_frontend_archive/include/cudnn_frontend/thirdparty"],
)

# cudnn-frontend 1.13 (header-only) and its nlohmann/json, as TensorFlow
# ships them; its cudnn.h include path comes from //third_party/gpus/cudnn.
cc_library(
    name = "cudnn_frontend",
    hdrs = glob(["include/external/cudnn_frontend_archive/include/**"]),
    includes = [
        "include/external/cudnn_frontend_archive/include",
        "include/third_party/gpus/cuda/libcudacxx/include",  # nv/target, for cuda_fp16.h
    ],
    deps = [":tf_header_lib"],
)

cc_library(
    name = "libtensorflow_framework",
    srcs = ["lib/{lib}"],
)

# tf2xla (XlaOpKernel, TF's conv lowering) and the XLA builder live here.
cc_library(
    name = "libtensorflow_cc",
    srcs = ["lib/{cc_lib}"],
)
"""

def _tf_local_impl(ctx):
    header_dir = ctx.os.environ.get("TF_HEADER_DIR", "")
    lib_dir = ctx.os.environ.get("TF_SHARED_LIBRARY_DIR", "")
    lib_name = ctx.os.environ.get("TF_SHARED_LIBRARY_NAME", "")
    if not header_dir or not lib_dir or not lib_name:
        fail("TensorFlow paths are not configured: run `python configure.py` (or `make build`) first.")
    ctx.symlink(header_dir, "include")
    ctx.symlink(lib_dir + "/" + lib_name, "lib/" + lib_name)
    cc_lib_name = lib_name.replace("tensorflow_framework", "tensorflow_cc")
    ctx.symlink(lib_dir + "/" + cc_lib_name, "lib/" + cc_lib_name)
    ctx.file("BUILD", _BUILD.replace("{lib}", lib_name).replace("{cc_lib}", cc_lib_name))

tf_local = repository_rule(
    implementation = _tf_local_impl,
    environ = ["TF_HEADER_DIR", "TF_SHARED_LIBRARY_DIR", "TF_SHARED_LIBRARY_NAME"],
    local = True,
)
