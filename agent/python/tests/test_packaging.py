"""How agent/python builds, without torch: its declared build requirements,
and what setup.py says when pip's --no-build-isolation leaves out the wheel
package."""

import os
import subprocess
import sys
import unittest

AGENT_PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PackagingTest(unittest.TestCase):
    def test_build_requirements_are_declared(self):
        with open(os.path.join(AGENT_PYTHON, "pyproject.toml"), encoding="utf-8") as f:
            text = f.read()
        self.assertIn("[build-system]", text)
        self.assertIn('"wheel"', text)
        self.assertIn('build-backend = "setuptools.build_meta"', text)

    def test_a_missing_wheel_package_is_named(self):
        # As in a fresh venv: neither the wheel package nor a setuptools
        # that builds wheels itself.
        hide = ("import runpy, sys; "
                "sys.modules['wheel'] = None; "
                "sys.modules['wheel.bdist_wheel'] = None; "
                "sys.modules['setuptools.command.bdist_wheel'] = None; "
                "sys.argv = ['setup.py', 'bdist_wheel']; "
                "runpy.run_path('setup.py', run_name='__main__')")
        run = subprocess.run([sys.executable, "-c", hide], cwd=AGENT_PYTHON,
                             capture_output=True, text=True, timeout=60)
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("pip install wheel", run.stderr)


if __name__ == "__main__":
    unittest.main()
