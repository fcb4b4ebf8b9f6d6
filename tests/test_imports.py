"""The package's import graph has no circles.

Every module of tf_ucudnn is parsed with ``ast`` (nothing is imported), and
each import of a tf_ucudnn module, at module level or inside a function,
is an edge. A circle means that two modules cannot be read, tested or
loaded one without the other.
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


def import_graph(modules):
    """``{module: {imported tf_ucudnn modules}}``: ``import a.b``, ``from a
    import b`` (b a module, else a itself) and relative forms, wherever they are."""
    graph = {}
    for name, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        is_package = path.endswith("__init__.py")
        edges = set()
        for node in ast.walk(tree):
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

    def test_every_module_is_seen(self):
        modules = package_modules()
        for name in ("tf_ucudnn", "tf_ucudnn._engine", "tf_ucudnn.database", "tf_ucudnn.nn"):
            self.assertIn(name, modules)

    def _graph_of(self, files):
        root = os.path.join(tempfile.mkdtemp(), "pkg")
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        return import_graph(package_modules(root, "pkg"))

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
