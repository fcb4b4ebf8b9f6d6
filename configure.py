"""Writes .tf_configure.bazelrc: every TensorFlow build flag, taken from tf.sysconfig.

Run with the Python whose TensorFlow the op library is built against
(`make build` uses .venv/bin/python).
"""

import os
import sys


def main():
    import tensorflow as tf

    compile_flags = tf.sysconfig.get_compile_flags()
    link_flags = tf.sysconfig.get_link_flags()
    header_dir = next(f[2:] for f in compile_flags if f.startswith("-I"))
    lib_dir = next(f[2:] for f in link_flags if f.startswith("-L"))
    lib_name = next(f[3:] for f in link_flags if f.startswith("-l:"))
    lines = [
        f"build --repo_env=TF_HEADER_DIR={header_dir}",
        f"build --repo_env=TF_SHARED_LIBRARY_DIR={lib_dir}",
        f"build --repo_env=TF_SHARED_LIBRARY_NAME={lib_name}",
    ]
    for flag in compile_flags:
        if flag.startswith("-I"):
            continue
        # --std=c++17 is a C++-only flag; the rest are preprocessor definitions.
        kind = "cxxopt" if "std=" in flag else "copt"
        lines.append(f"build --{kind}={flag}")
    # The library reports the TensorFlow it was built for; tf_ucudnn checks it at import.
    major, minor = tf.__version__.split(".")[:2]
    lines.append(f"build --copt=-DTF_UCUDNN_TF_MAJOR={major} --copt=-DTF_UCUDNN_TF_MINOR={minor}")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".tf_configure.bazelrc")
    with open(path, "w") as f:
        f.write("# Written by configure.py from tf.sysconfig; do not edit.\n")
        f.write("\n".join(lines) + "\n")
    print(f"configured for tensorflow {tf.__version__} ({sys.executable}) -> {path}")


if __name__ == "__main__":
    main()
