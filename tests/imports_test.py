"""Every `from xflowrl... import name` in the repository's Python files names
something that exists, function-local imports included.

The type check covers `xflowrl/` only; the entry points, benchmarks and
scripts import much of the library inside functions, where a name that
moved is found only when that function runs (a long run, late).
"""

import ast
import importlib
import os

from absl.testing import absltest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FOLDERS = ("xflowrl", "experiments", "benchmarks", "scripts", "tests")


def _python_files():
    for folder in _FOLDERS:
        for parent, dirs, files in os.walk(os.path.join(_ROOT, folder)):
            dirs[:] = [d for d in dirs if not d.startswith((".", "__pycache__"))]
            for name in files:
                if name.endswith(".py"):
                    yield os.path.join(parent, name)


def _missing(path):
    """(line, "module.name") of every project import in `path` that does not resolve."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (
                node.module or "").split(".")[0] == "xflowrl":
            module = importlib.import_module(node.module)
            for alias in node.names:
                if alias.name == "*" or hasattr(module, alias.name):
                    continue
                try:  # a submodule not yet imported
                    importlib.import_module(f"{node.module}.{alias.name}")
                except ImportError:
                    out.append((node.lineno, f"{node.module}.{alias.name}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "xflowrl":
                    importlib.import_module(alias.name)
    return out


class ImportsTest(absltest.TestCase):

    def test_every_project_import_resolves(self):
        files = list(_python_files())
        self.assertGreater(len(files), 200)
        missing = [(os.path.relpath(path, _ROOT), line, name)
                   for path in files for line, name in _missing(path)]
        self.assertEmpty(missing, "imports of names that do not exist (file, line, name)")


if __name__ == "__main__":
    absltest.main()
