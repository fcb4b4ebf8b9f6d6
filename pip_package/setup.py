"""The one thing pyproject.toml cannot say: the wheel's tag (all metadata is in
pyproject.toml).

The wheel carries ``_ucudnn_ops.so``, a TensorFlow op library: it is for one
platform (linux_x86_64) but for any Python 3, since it uses no Python C API
(TensorFlow loads it with ``tf.load_op_library`` and ctypes). So the tag is
``py3-none-linux_x86_64``, not the ``cp3X-cp3X`` of an extension module.

`make wheel` then runs ``auditwheel repair`` on it: the library needs
``libtensorflow_framework.so.2`` and ``libtensorflow_cc.so.2``, which no
manylinux policy lists and which must not be bundled (they have to be the
very libraries of the installed TensorFlow), so those two are excluded
(``--exclude``); its other needs, glibc, libstdc++ and libgcc_s, fix the tag
(``manylinux_2_34_x86_64`` when built on Debian 12).
"""

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel


class BinaryDistribution(Distribution):
    """Carries a compiled library: installed as platform-specific (platlib)."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """This machine's platform tag, for any Python 3 (no Python ABI in the library)."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=BinaryDistribution, cmdclass={"bdist_wheel": PlatformWheel})
