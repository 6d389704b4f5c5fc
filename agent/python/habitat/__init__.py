"""habitat: the agent's import name before habitat_agent, kept for a while.

`habitat` is also habitat-lab's import name, so the agent is now
`habitat_agent` (agent/README.md, "Import name"). This module makes old code
(`import habitat`, `from habitat import client`, `habitat.OperationTracker`,
`habitat._C`) run on habitat_agent, with one DeprecationWarning. pip installs
it only when asked (HABITAT_AGENT_COMPAT_SHIM=1; setup.py), so that by
default habitat-lab and the agent install side by side.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

import habitat_agent



def _importer_stacklevel() -> int:
    """The stack level of the code that imported this module, past
    importlib's frames, so the warning is attributed to it (and shown by
    default where that code is __main__)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame, level = frame.f_back, level + 1
    return level


warnings.warn("the agent's import name is now habitat_agent; `import habitat` is deprecated "
              "and will be removed (agent/README.md, \"Import name\")",
              DeprecationWarning, stacklevel=_importer_stacklevel())

__all__ = habitat_agent.__all__
__version__ = habitat_agent.__version__


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports habitat.X as habitat_agent.X: the same module object, so
    isinstance checks and the _C extension (loaded once) hold across both
    names."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(__name__ + "."):
            return None
        target_name = "habitat_agent" + fullname[len(__name__):]
        if importlib.util.find_spec(target_name) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("habitat_agent" + spec.name[len(__name__):])

    def exec_module(self, module):
        pass  # habitat_agent's import ran it


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())


def __getattr__(name):
    return getattr(habitat_agent, name)
