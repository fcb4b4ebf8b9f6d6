"""Builds the tf_ucudnn wheel (`make wheel`): the Python package plus the op
library built by Bazel against the pip TensorFlow. `make wheel` copies this
file, the package and the README into build/pip and runs `pip wheel` there."""

import os
import re

from setuptools import Distribution, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def version():
    with open(os.path.join(HERE, "tf_ucudnn", "__init__.py")) as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


class BinaryDistribution(Distribution):
    """The wheel carries a compiled library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(
    name="tf_ucudnn",
    version=version(),
    description="μ-cuDNN for TensorFlow 2 and Keras 3: micro-batched convolutions that fit "
                "fast cuDNN algorithms into a small workspace",
    long_description=open(os.path.join(HERE, "README.md")).read(),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["tf_ucudnn", "tf_ucudnn.*"]),
    package_data={"tf_ucudnn": ["_ucudnn_ops.so", "data/*.csv"]},
    license="Apache-2.0",
    classifiers=["License :: OSI Approved :: Apache Software License",
                 "Programming Language :: Python :: 3",
                 "Topic :: Scientific/Engineering :: Artificial Intelligence"],
    python_requires=">=3.10",
    install_requires=["tensorflow==2.21.*", "keras>=3.15,<4", "numpy", "pulp>=3.3,<4",
                      "highspy>=1.13,<1.16"],
    # The benchmark's PNG figures (tf-ucudnn bench); the rest runs without it.
    extras_require={"bench": ["matplotlib"]},
    entry_points={"console_scripts": ["tf-ucudnn = tf_ucudnn.cli:main"]},
    distclass=BinaryDistribution,
    zip_safe=False,
)
