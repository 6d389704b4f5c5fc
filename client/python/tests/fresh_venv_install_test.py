"""Installs habitat-client into a fresh virtual environment, offline, and uses it.

    python3 client/python/tests/fresh_venv_install_test.py [--venv DIR] [--source ROOT]

1. `python -m venv --system-site-packages DIR`: the system's grpcio and
   protobuf (Debian 12: python3-grpcio, python3-protobuf) satisfy the
   package's dependencies, so nothing is downloaded.
2. `pip install --no-build-isolation --no-index ROOT/client/python` in it.
3. In the venv, from a directory outside the source tree: the package
   imports from the venv without importing torch, its dependencies are
   declared, and a PredictRequest is built from a committed agent trace.
4. With $HABITAT_SERVER (a habitat-server binary): a server on a free port
   and real predict round-trips returning typed results, one a fit.

Run by CTest (python_client_fresh_venv_install). Exits 77 (skipped) only
when this interpreter lacks grpcio or protobuf, which the venv inherits.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from server_process import ServerProcess  # beside this file

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TRACE = os.path.join("tests", "testdata", "agent_suite", "h100", "resnet50_b32_fp32.trace.gz")
# With memory data (Trace.memory), for a fit.
MEMORY_TRACE = os.path.join("tests", "testdata", "agent_suite", "h100_memory",
                            "resnet50_b16_fp32.trace.gz")


def fail(message: str) -> None:
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def run(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, **kwargs)


def outside(venv: str, source: str) -> None:
    """Creates the venv, installs the client, runs inside() in it."""
    try:
        import grpc  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as e:
        print(f"skipped: {sys.executable} lacks grpcio/protobuf ({e}), which the venv would "
              "inherit (Debian: apt-get install python3-grpcio python3-protobuf)")
        sys.exit(77)
    shutil.rmtree(venv, ignore_errors=True)
    made = run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    print(made.stdout)
    if made.returncode != 0:
        fail("cannot create a venv (Debian: apt-get install python3-venv, which "
             "scripts/install_deps.sh installs)")
    python = os.path.join(venv, "bin", "python")
    # --isolated: no user pip configuration or PIP_* variables (an index URL
    # or a find-links would defeat --no-index's point).
    install = run([python, "-m", "pip", "--isolated", "install", "--no-build-isolation",
                   "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
                   os.path.join(source, "client", "python")])
    print(install.stdout)
    if install.returncode != 0:
        fail(f"pip install of {os.path.join(source, 'client', 'python')} failed "
             f"(exit {install.returncode})")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with tempfile.TemporaryDirectory() as cwd:  # no source directory on sys.path
        checks = run([python, os.path.abspath(__file__), "--inside", "--venv", venv,
                      "--source", source], cwd=cwd, env=env)
    print(checks.stdout)
    if checks.returncode != 0:
        fail(f"the checks in the venv failed (exit {checks.returncode})")

    # The agent needs torch to build its extension; without it, pip must
    # show why in a sentence, not an ImportError traceback.
    if run([python, "-c", "import torch"]).returncode != 0:
        agent = run([python, "-m", "pip", "--isolated", "install", "--no-build-isolation",
                     "--no-index", "--no-cache-dir", "--disable-pip-version-check", "--no-input",
                     os.path.join(source, "agent", "python")])
        print(agent.stdout)
        if agent.returncode == 0 or "torch is not importable here" not in agent.stdout \
                or "Traceback" in agent.stdout:
            fail("pip install of agent/python without torch should fail with setup.py's "
                 "message, not a traceback")
        print("ok: the agent without torch fails with setup.py's message")
    print("PASS: habitat-client installs into a fresh venv offline and works without torch")


def check(condition, message):
    if not condition:
        fail(message)
    print(f"ok: {message}")


def inside(venv: str, source: str) -> None:
    """The checks, run by the venv's interpreter."""
    import importlib.metadata

    import habitat_client
    check(os.path.realpath(habitat_client.__file__).startswith(os.path.realpath(venv)),
          f"habitat_client imports from the venv ({habitat_client.__file__})")
    check("torch" not in sys.modules, "importing habitat_client imports no torch")
    check("habitat" not in sys.modules, "nor the agent's habitat package")
    requires = " ".join(importlib.metadata.requires("habitat-client") or [])
    check("grpcio" in requires and "protobuf" in requires,
          f"habitat-client declares grpcio and protobuf ({requires})")
    check(os.path.isfile(habitat_client.DESCRIPTOR_FILE)
          and os.path.realpath(habitat_client.DESCRIPTOR_FILE).startswith(os.path.realpath(venv)),
          "the descriptor set is installed as package data")

    trace = os.path.join(source, TRACE)
    request = habitat_client.build_predict_request(trace, devices=["H200", "A100-SXM-80GB"],
                                                   catalog="aws")
    check(request.trace.batch_size == 32 and request.trace.model_name == "resnet50"
          and len(request.trace.operations) > 100,
          f"a PredictRequest from {TRACE} ({len(request.trace.operations)} operations)")
    check(type(request).FromString(request.SerializeToString()) == request,
          "the request serialises and parses back")

    binary = os.environ.get("HABITAT_SERVER")
    if binary:
        if not os.access(binary, os.X_OK):
            fail(f"HABITAT_SERVER={binary} is not an executable")
        server = ServerProcess(binary, os.path.join(source, "data"),
                               os.path.join(source, "models"))
        try:
            result = habitat_client.predict(trace, server=f"127.0.0.1:{server.port}",
                                            devices=["H200", "A100-SXM-80GB"], catalog="aws")
            fitted = habitat_client.predict(os.path.join(source, MEMORY_TRACE),
                                            server=f"127.0.0.1:{server.port}",
                                            devices=["H200", "A100-SXM-80GB"], catalog="aws",
                                            fit=True)
        finally:
            server.stop()
        check(isinstance(result, habitat_client.PredictionResult)
              and all(isinstance(p, habitat_client.DevicePrediction) for p in result.predictions),
              "predict returns typed results")
        check({p.device_id for p in result.predictions} == {"H200", "A100-SXM-80GB"},
              "one prediction per requested GPU")
        h200 = result.device("H200")
        check(h200.gpu_time_ns > 0 and h200.wall_time_ns > 0 and h200.has_price
              and h200.instance_type and result.batch_size == 32,
              f"H200: GPU {h200.gpu_time_ns / 1e6:.3f} ms, wall {h200.wall_time_ns / 1e6:.3f} ms, "
              f"{h200.price_per_hour} {result.currency}/h on {h200.instance_type}")
        check("H200" in result.format_table(), "format_table lists the GPUs")
        check(fitted.is_fit and all(p.batch_size > 0 and p.memory is not None
                                    for p in fitted.predictions),
              "predict(fit=True): " + ", ".join(
                  f"{p.device_id} at batch {p.batch_size}" for p in fitted.ranked(by="cost")))
    else:
        print("note: HABITAT_SERVER not set; no predict round-trip")
    check("torch" not in sys.modules, "still no torch after using the client")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", default="", help="where to create the venv (default: a temp dir)")
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="the repository root")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    if args.inside:
        inside(args.venv, source)
    elif args.venv:
        outside(os.path.abspath(args.venv), source)
    else:
        with tempfile.TemporaryDirectory(prefix="habitat-client-venv-") as venv:
            outside(venv, source)


if __name__ == "__main__":
    main()
