"""The package's import graph has no circles.

Every module of tf_ucudnn is parsed with ``ast`` (nothing is imported), and
each import of a tf_ucudnn module, at module level or inside a function,
is an edge. A circle means that two modules cannot be read, tested or
loaded one without the other.

Python also runs a package's ``__init__`` before any module of the package,
so what the ``__init__`` imports when it is loaded runs before each of its
modules: :func:`load_graph` adds those edges (module-level imports only; an
import in a function runs when the function is called), and a circle there
means that loading one module of a package loads it again through its
package (``python -m pkg.mod`` then runs ``pkg.mod`` twice).
"""

import ast
import importlib.util
import os
import tempfile

import tensorflow as tf

PACKAGE = "tf_ucudnn"
# The package that the tests run against: this checkout's, or the installed
# wheel's (make wheel-test); found without importing it.
ROOT = importlib.util.find_spec(PACKAGE).submodule_search_locations[0]


def package_modules(root=ROOT, package=PACKAGE):
    """``{dotted module name: source path}`` for every .py file under ``root``."""
    modules = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            parts = os.path.relpath(os.path.join(folder, name), root)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = os.path.join(folder, name)
    return modules


def _resolve(module, level, current, is_package):
    """The absolute name of ``from <level dots><module> import ...`` in ``current``."""
    if level == 0:
        return module
    base = current.split(".")
    base = base[:len(base) - level + (1 if is_package else 0)]
    return ".".join(base + ([module] if module else []))


def _module_level(tree):
    """The nodes of ``tree`` that run when the module is loaded: all but the
    bodies of functions (a class's body runs, its methods' do not)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(child for child in ast.iter_child_nodes(node)
                       if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                 ast.Lambda)))


def import_graph(modules, module_level_only=False):
    """``{module: {imported tf_ucudnn modules}}``: ``import a.b``, ``from a
    import b`` (b a module, else a itself) and relative forms, wherever they
    are (with ``module_level_only``: outside functions)."""
    graph = {}
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        is_package = path.endswith("__init__.py")
        edges = set()
        for node in (_module_level(tree) if module_level_only else ast.walk(tree)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node.module, node.level, name, is_package)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                # `import a.b.c` names a.b.c; the longest known prefix is the module.
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def load_graph(modules):
    """What loading each module runs: its module-level imports, and its
    package (Python loads ``a/__init__.py`` before ``a.b``)."""
    graph = import_graph(modules, module_level_only=True)
    for name in modules:
        package = name.rpartition(".")[0]
        if package in modules:
            graph[name].add(package)
    return graph


def find_cycle(graph):
    """One circle of ``graph`` as a list of modules (first == last), or None."""
    state = {}  # module -> 1 while on the path, 2 when done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


class ImportGraphTest(tf.test.TestCase):

    def test_the_package_has_no_import_circle(self):
        graph = import_graph(package_modules())
        cycle = find_cycle(graph)
        self.assertIsNone(cycle, f"import circle: {' -> '.join(cycle or [])}")

    def test_loading_a_module_does_not_load_it_again_through_its_package(self):
        cycle = find_cycle(load_graph(package_modules()))
        self.assertIsNone(cycle, f"circle when loading: {' -> '.join(cycle or [])}")

    def test_every_module_is_seen(self):
        modules = package_modules()
        for name in ("tf_ucudnn", "tf_ucudnn._engine", "tf_ucudnn.database", "tf_ucudnn.nn"):
            self.assertIn(name, modules)

    def _modules_of(self, files):
        """``package_modules`` of a package ``pkg`` made of ``files`` ({path: source})."""
        root = os.path.join(tempfile.mkdtemp(), "pkg")
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return package_modules(root, "pkg")

    def _graph_of(self, files):
        return import_graph(self._modules_of(files))

    def test_the_checker_finds_a_circle_through_a_function_level_import(self):
        graph = self._graph_of({"__init__.py": "", "a.py": "from pkg import b\n",
                                "b.py": "def f():\n    from pkg.sub.c import g\n",
                                "sub/__init__.py": "", "sub/c.py": "from .. import a\n"})
        self.assertEqual(find_cycle(graph), ["pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"])

    def test_the_checker_accepts_a_graph_without_circles(self):
        graph = self._graph_of({"__init__.py": "from pkg import a\n", "a.py": "import pkg.b\n",
                                "b.py": "import os\n"})
        self.assertEqual(graph, {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set()})
        self.assertIsNone(find_cycle(graph))

    def test_the_checker_finds_a_module_importing_a_name_of_its_package(self):
        graph = self._graph_of({"__init__.py": "", "sub/__init__.py": "from pkg.sub.a import f\n",
                                "sub/a.py": "def f():\n    from pkg.sub import VALUE\n"})
        self.assertEqual(find_cycle(graph), ["pkg.sub", "pkg.sub.a", "pkg.sub"])

    def test_the_load_checker_finds_a_package_that_loads_its_modules(self):
        files = {"__init__.py": "", "sub/__init__.py": "from pkg.sub.a import f\n",
                 "sub/a.py": "from pkg.sub import b\n", "sub/b.py": "import os\n"}
        self.assertIsNone(find_cycle(self._graph_of(files)))  # no import circle as such
        self.assertEqual(find_cycle(load_graph(self._modules_of(files))),
                         ["pkg.sub", "pkg.sub.a", "pkg.sub"])
        # Bound lazily, in a function, the package loads nothing with its modules.
        files["sub/__init__.py"] = "def __getattr__(name):\n    from pkg.sub.a import f\n"
        self.assertIsNone(find_cycle(load_graph(self._modules_of(files))))
