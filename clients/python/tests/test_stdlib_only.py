"""The package imports only the standard library and itself, and declares
no dependency."""

import ast
import sys
import unittest

from gateway import REPO

PKG = REPO / "clients" / "python" / "src" / "replyonce_gateway"


class StandardLibraryOnly(unittest.TestCase):
    def test_every_import_is_stdlib_or_the_package(self):
        stdlib = sys.stdlib_module_names
        files = sorted(PKG.rglob("*.py"))
        self.assertGreaterEqual(len(files), 8)
        for f in files:
            tree = ast.parse(f.read_text("utf-8"), str(f))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level > 0:
                        continue  # the package's own modules
                    names = [node.module or ""]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    self.assertTrue(top in stdlib or top == "__future__", f"{f.name} imports {name}")

    def test_no_dependency_is_declared(self):
        text = (REPO / "clients" / "python" / "pyproject.toml").read_text("utf-8")
        self.assertIn("dependencies = []", text)
        self.assertNotIn("optional-dependencies", text)
        self.assertIn('requires-python = ">=3.10"', text)


if __name__ == "__main__":
    unittest.main()
