"""Builds habitat_agent._C, the agent's PyTorch C++ extension, against the torch
that is installed (torch.utils.cpp_extension), with CUPTI when its headers
and library are found.

    cd agent/python && python setup.py build_ext --inplace
    pip install --no-build-isolation ./client/python ./agent/python   # from the root

Build isolation would hide the installed torch, hence --no-build-isolation.
The prediction client is the habitat-client package (client/python), which
this one depends on and which needs no torch.

CUPTI is looked for, in order, in $HABITAT_CUPTI_ROOT, in the nvidia-cuda-cupti
wheel next to torch (the copy torch itself loads), and in the CUDA toolkit
($CUDA_HOME, extras/CUPTI or the main include/lib64). Without it the
extension still builds, with only the "host" source (op recording, no
kernels).
"""

import glob
import os
import sys
from pathlib import Path

from setuptools import setup


def _can_build_wheels() -> bool:
    """setuptools before 70.1 builds wheels only with the wheel package,
    which --no-build-isolation does not install (pyproject.toml declares it
    for isolated builds)."""
    for module in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            __import__(module)
            return True
        except ImportError:
            pass
    return False


if "bdist_wheel" in sys.argv and not _can_build_wheels():
    sys.exit("habitat-agent: building a wheel needs the wheel package with this setuptools, "
             "and --no-build-isolation does not install build requirements: "
             "`pip install wheel` (or setuptools>=70.1), then install again.")

try:
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension
except ImportError as e:
    # A message instead of a traceback: the usual cause is pip's build
    # isolation, or wanting only the client.
    sys.exit(
        "habitat-agent builds a PyTorch C++ extension against the torch you train with, and "
        f"torch is not importable here ({e}). Install torch, then build without pip's build "
        "isolation (it hides the installed torch): `pip install --no-build-isolation "
        "./client/python ./agent/python` from the repository root. To predict without the "
        "agent, the client alone needs no torch: `pip install ./client/python`.")

# HABITAT_AGENT_COMPAT_SHIM=1 also installs `habitat`, the deprecated import
# name, as a shim over habitat_agent. Not by default: habitat-lab's package
# is `habitat` too, and the two would overwrite each other's files.
_WANTS_COMPAT_SHIM = os.environ.get("HABITAT_AGENT_COMPAT_SHIM", "") == "1"

HERE = Path(__file__).resolve().parent
AGENT = HERE.parent
ROOT = AGENT.parent


def cupti_candidates():
    env = os.environ.get("HABITAT_CUPTI_ROOT")
    if env:
        yield Path(env) / "include", Path(env) / "lib64"
        yield Path(env) / "include", Path(env) / "lib"
    try:
        import nvidia  # the CUDA wheels torch depends on
        for base in nvidia.__path__:
            for sub in ("cu13", "cuda_cupti"):
                yield Path(base) / sub / "include", Path(base) / sub / "lib"
    except ImportError:
        pass
    cuda = Path(CUDA_HOME or "/usr/local/cuda")
    yield cuda / "extras/CUPTI/include", cuda / "extras/CUPTI/lib64"
    yield cuda / "include", cuda / "lib64"


def find_cupti():
    for include, lib in cupti_candidates():
        if (include / "cupti.h").exists() and glob.glob(str(lib / "libcupti.so*")):
            return include, lib
    return None


def cuda_include():
    # cupti.h includes cuda.h; the wheel and the toolkit both ship it.
    for c in (Path(CUDA_HOME or "/usr/local/cuda") / "include",):
        if (c / "cuda.h").exists():
            return c
    return None


capture = [str(AGENT / "capture" / n) for n in
           ("kernel_counters.cc", "records.cc", "summary.cc", "trace_assembler.cc",
            "wire_format.cc")]
torch_part = [str(AGENT / "torch" / n) for n in
              ("op_recorder.cc", "tracker.cc", "bindings.cc")]
sources = capture + torch_part
include_dirs = [str(ROOT)]
library_dirs, libraries, macros, link_args = [], [], [], []

cupti = None if os.environ.get("HABITAT_NO_CUPTI") else find_cupti()
if cupti is not None:
    include, lib = cupti
    print(f"habitat setup: CUPTI headers {include}, library {lib}", file=sys.stderr)
    sources.append(str(AGENT / "cupti" / "cupti_source.cc"))
    sources.append(str(AGENT / "cupti" / "counter_collector.cc"))
    include_dirs.append(str(include))
    # The counter collector needs the range profiler headers (CUDA 12.6+);
    # take them from another CUPTI copy of the candidates if this one lacks
    # them (headers only: the library stays the one torch loads).
    if not (include / "cupti_range_profiler.h").exists():
        for other, _ in cupti_candidates():
            if (other / "cupti_range_profiler.h").exists():
                print(f"habitat setup: range profiler headers from {other}",
                      file=sys.stderr)
                include_dirs.append(str(other))
                break
    extra = cuda_include()
    if extra is not None and extra != include:
        include_dirs.append(str(extra))
    library_dirs.append(str(lib))
    # The CUDA wheels ship only libcupti.so.N (no unversioned link): name
    # the file itself then.
    if (lib / "libcupti.so").exists():
        libraries.append("cupti")
    else:
        versioned = sorted(glob.glob(str(lib / "libcupti.so.*")), key=len)[0]
        libraries.append(":" + os.path.basename(versioned))
    libraries.append("dl")  # the counter collector finds libcuda's context calls
    macros.append(("HABITAT_AGENT_WITH_CUPTI", "1"))
    link_args.append(f"-Wl,-rpath,{lib}")
else:
    print("habitat setup: CUPTI not found; building without it (host source "
          "only)", file=sys.stderr)

setup(
    name="habitat-agent",
    version="0.1.0",
    # habitat: the import name before habitat_agent, which habitat-lab also
    # uses; its shim only when asked (agent/README.md, "Import name").
    packages=["habitat_agent"] + (["habitat"] if _WANTS_COMPAT_SHIM else []),
    # habitat_agent.client re-exports habitat_client (client/python).
    install_requires=["habitat-client"],
    ext_modules=[
        CppExtension(
            "habitat_agent._C",
            sources,
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=libraries,
            define_macros=macros,
            extra_compile_args=["-O2", "-Wall"],
            extra_link_args=link_args,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
