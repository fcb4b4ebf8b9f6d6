"""Public names of a package bound on first use (PEP 562).

The benchmark packages import none of their modules when imported, so that a
worker started as ``python -m tf_ucudnn.bench.models`` finds its module
unimported (runpy runs it once, as ``__main__``) and ``from tf_ucudnn.bench
import harness`` imports the harness alone.
"""

import importlib
import sys


def lazy_exports(package, exports):
    """The module attributes that bind ``package``'s public names on first use.

    Args:
      package: the package's ``__name__``.
      exports: ``{submodule: (name, ...)}``, the public names and the
        submodule of ``package`` that defines each.

    Returns:
      ``(__all__, __getattr__, __dir__)`` for the package to assign: the sorted
      names; a module ``__getattr__`` that imports a name's submodule the first
      time the name is read and keeps the value in the package (raising
      ``AttributeError`` for any other name); and a ``__dir__`` listing both.
    """
    module_of = {name: module for module, names in exports.items() for name in names}
    names = sorted(module_of)

    def __getattr__(name):
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module_of[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(names))

    return names, __getattr__, __dir__
