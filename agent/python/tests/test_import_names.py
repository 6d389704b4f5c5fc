"""The agent's import name, habitat_agent, and the deprecated `habitat`
shim over it (habitat-lab's import name is `habitat` too); no torch."""

import os
import subprocess
import sys
import unittest

AGENT_PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, env: dict = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONPATH=AGENT_PYTHON, PYTHONDONTWRITEBYTECODE="1")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", code], cwd=AGENT_PYTHON, env=full_env,
                          capture_output=True, text=True, timeout=60)


# Runs setup.py with a stand-in for torch's cpp_extension and setuptools'
# setup, and prints the packages it would install.
SETUP_PACKAGES = """
import runpy, sys, types
import setuptools
ext = types.ModuleType('torch.utils.cpp_extension')
ext.CUDA_HOME = None
ext.BuildExtension = object
ext.CppExtension = lambda *args, **kwargs: None
for name in ('torch', 'torch.utils'):
    sys.modules[name] = types.ModuleType(name)
sys.modules['torch.utils.cpp_extension'] = ext
setuptools.setup = lambda **kwargs: print(sorted(kwargs['packages']))
sys.argv = ['setup.py', '--name']
runpy.run_path('setup.py', run_name='__main__')
"""


class ImportNamesTest(unittest.TestCase):
    def test_habitat_is_a_shim_that_warns_once(self):
        run = run_python(
            "import warnings; warnings.simplefilter('always')\n"
            "import habitat\n"
            "import habitat\n"
            "from habitat import client\n"
            "import habitat.client as by_path\n"
            "import habitat_agent, habitat_agent.client\n"
            "assert client is by_path is habitat_agent.client\n"
            "assert habitat.__all__ == habitat_agent.__all__\n"
            "assert habitat.client.ServiceError is habitat_agent.client.ServiceError\n"
            "print('ok')\n")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(run.stdout, "ok\n")
        self.assertEqual(run.stderr.count("DeprecationWarning"), 1, run.stderr)
        self.assertIn("import name is now habitat_agent", run.stderr)

    def test_habitat_agent_imports_without_the_shim_or_a_warning(self):
        run = run_python("import warnings; warnings.simplefilter('error')\n"
                         "import sys, habitat_agent, habitat_agent.client\n"
                         "assert 'habitat' not in sys.modules\n")
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_pip_installs_the_shim_only_when_asked(self):
        plain = run_python(SETUP_PACKAGES, {"HABITAT_AGENT_COMPAT_SHIM": ""})
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertEqual(plain.stdout.splitlines()[0], "['habitat_agent']")
        shim = run_python(SETUP_PACKAGES, {"HABITAT_AGENT_COMPAT_SHIM": "1"})
        self.assertEqual(shim.returncode, 0, shim.stderr)
        self.assertEqual(shim.stdout.splitlines()[0], "['habitat', 'habitat_agent']")


if __name__ == "__main__":
    unittest.main()
