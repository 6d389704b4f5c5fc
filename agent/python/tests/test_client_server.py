"""habitat_agent.client against the real habitat-server binary (no GPU, no torch).

Starts habitat-server on free loopback ports (in-memory store, the source
tree's data/ and models/), once without and once with bearer tokens, and
predicts a real H100 capture of ResNet-50 (batch 32, fp32). Run by CTest
(client_server_test); by hand, from agent/python:

    HABITAT_SERVER=../../build/server/habitat-server python3 tests/test_client_server.py

Exits 77 (CTest: skipped) when grpcio or protobuf is not importable.
"""

import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # agent/python: the habitat package
SOURCE = os.path.abspath(os.path.join(HERE, "..", "..", ".."))

try:
    import grpc  # noqa: F401
    import google.protobuf  # noqa: F401
except ImportError as e:
    print(f"skipped: grpcio/protobuf not importable here ({e})")
    sys.exit(77)

from habitat_agent import client  # noqa: E402

# The server launcher the client package's tests use too.
sys.path.insert(0, os.path.join(SOURCE, "client", "python", "tests"))
import server_process  # noqa: E402

SERVER = os.environ.get("HABITAT_SERVER", os.path.join(SOURCE, "build", "server", "habitat-server"))
CLI = os.environ.get("HABITAT_CLI", "")  # the C++ `habitat` CLI, for the table comparison
DATA_DIR = os.path.join(SOURCE, "data")
MODELS_DIR = os.path.join(SOURCE, "models")
SUITE = os.path.join(SOURCE, "tests", "testdata", "agent_suite")
CASE = "resnet50_b32_fp32"
TRACE_GZ = os.path.join(SUITE, "h100", CASE + ".trace.gz")
TOKEN = "s3cret-token-for-the-client-test"


class ServerProcess(server_process.ServerProcess):
    """habitat-server on a free port with this checkout's data and models."""

    def __init__(self, *extra_args):
        super().__init__(SERVER, DATA_DIR, MODELS_DIR, *extra_args)


def measured(gpu, case):
    with open(os.path.join(SUITE, gpu, "measurements.json")) as f:
        cases = json.load(f)["cases"]
    return next(c for c in cases if c["case"] == case)


class ClientServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.access(SERVER, os.X_OK):
            raise unittest.SkipTest(f"no habitat-server binary at {SERVER} (set HABITAT_SERVER)")
        cls.tmp = tempfile.TemporaryDirectory()
        token_file = os.path.join(cls.tmp.name, "tokens")
        with open(token_file, "w") as f:
            f.write(f"tenant-a {TOKEN}\n")
        cls.server = ServerProcess()
        cls.secured = ServerProcess(f"--token_file={token_file}")
        with gzip.open(TRACE_GZ, "rb") as f:
            cls.trace = f.read()
        cls.trace_message = client.messages()["Trace"].FromString(cls.trace)
        # One prediction for every GPU, shared by the tests that read it.
        cls.response = client.predict(cls.trace, server=cls.server.address)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.secured.stop()
        cls.tmp.cleanup()

    def by_device(self, response):
        return {p["device_id"]: p for p in response["predictions"]}

    def test_every_listed_device_gets_a_prediction(self):
        devices = client.list_devices(server=self.server.address)
        ids = {d["id"] for d in devices}
        self.assertIn("H200", ids)
        self.assertEqual(ids, set(self.by_device(self.response)))
        for p in self.response["predictions"]:
            self.assertGreater(p["gpu_time_ns"], 0, p["device_id"])
            self.assertGreater(p["samples_per_second"], 0, p["device_id"])
            # Throughput follows the wall time (an instance bills it), not the GPU time.
            self.assertGreater(p["wall_time_ns"], 0, p["device_id"])
            self.assertAlmostEqual(p["samples_per_second"], 32 / (p["wall_time_ns"] / 1e9),
                                   delta=1e-6 * p["samples_per_second"])
        self.assertEqual(self.response["batch_size"], 32)

    def test_origin_gets_the_measured_time(self):
        self.assertEqual(self.response["origin_device_id"], "H100-SXM")
        origin = self.by_device(self.response)["H100-SXM"]
        self.assertTrue(origin["is_origin"])
        ops_sum = sum(op.forward.time_ns + op.backward.time_ns
                      for op in self.trace_message.operations)
        self.assertEqual(origin["gpu_time_ns"], ops_sum)
        self.assertEqual({t["method"] for t in origin["method_totals"]},
                         {"PREDICTION_METHOD_MEASURED"})
        self.assertEqual([p for p in self.response["predictions"] if p["is_origin"]], [origin])

    def test_h200_gpu_time_within_5_percent_of_the_measurement(self):
        predicted = self.by_device(self.response)["H200"]["gpu_time_ns"]
        actual = measured("h200", CASE)["gpu_busy_ns_median"]
        error = predicted / actual - 1
        print(f"\nH200 {CASE}: predicted {predicted / 1e6:.3f} ms, measured GPU busy "
              f"{actual / 1e6:.3f} ms ({100 * error:+.1f} %)", file=sys.stderr)
        self.assertLess(abs(error), 0.05)

    def test_inputs_path_gzip_bytes_and_subset(self):
        # The .gz file itself, by path; two devices; the recorded batch size
        # may be restated, another one is refused (it would only relabel).
        with self.assertRaisesRegex(ValueError, "records batch size 32; batch_size=64"):
            client.predict(TRACE_GZ, server=self.server.address, devices="H200", batch_size=64)
        response = client.predict(TRACE_GZ, server=self.server.address,
                                  devices=["H200", "A100-SXM-80GB"], batch_size=32,
                                  include_breakdown=True, catalog="aws")
        by_device = self.by_device(response)
        self.assertEqual(set(by_device), {"H200", "A100-SXM-80GB"})
        self.assertEqual(response["batch_size"], 32)
        self.assertEqual(response["catalog"], "aws")
        h200 = by_device["H200"]
        full = self.by_device(self.response)["H200"]
        self.assertEqual(h200["gpu_time_ns"], full["gpu_time_ns"])
        self.assertAlmostEqual(h200["samples_per_second"], full["samples_per_second"],
                               delta=1e-6 * h200["samples_per_second"])
        self.assertEqual(len(h200["operations"]), len(self.trace_message.operations))
        table = client.format_table(response, breakdown=True)
        self.assertIn("breakdown:", table)
        self.assertRegex(table, r"\n    1 A100-SXM-80GB|\n    1 H200")

    def test_upload_then_predict_by_id(self):
        trace_id = client.upload(self.trace, server=self.server.address)
        self.assertRegex(trace_id, r"^sha256:[0-9a-f]{64}$")
        response = client.predict(trace_id=trace_id, server=self.server.address,
                                  devices="H200")
        self.assertEqual(response["trace_id"], trace_id)
        self.assertEqual(response["predictions"][0]["gpu_time_ns"],
                         self.by_device(self.response)["H200"]["gpu_time_ns"])

    def test_unknown_device_gives_the_servers_message(self):
        with self.assertRaises(client.ServiceError) as raised:
            client.predict(self.trace, server=self.server.address, devices=["GTX 9999"])
        # The backend answers NOT_FOUND for a device id it does not list.
        self.assertEqual(raised.exception.code, "NOT_FOUND")
        self.assertIn("GTX 9999", raised.exception.details)
        self.assertIn("NOT_FOUND", str(raised.exception))

    def test_bad_trace_gives_invalid_argument(self):
        with self.assertRaises(client.ServiceError) as raised:
            client.predict(b"\x0a\x05hello", server=self.server.address)
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        with self.assertRaises(ValueError):
            client.predict(b'{"traceEvents": []}', server=self.server.address)

    def test_tokens(self):
        with self.assertRaises(client.ServiceError) as raised:
            client.list_devices(server=self.secured.address, token="wrong")
        self.assertEqual(raised.exception.code, "UNAUTHENTICATED")
        self.assertIn("not valid", raised.exception.details)
        with self.assertRaises(client.ServiceError) as raised:
            client.list_devices(server=self.secured.address, token=None)
        self.assertEqual(raised.exception.code, "UNAUTHENTICATED")
        response = client.predict(self.trace, server=self.secured.address, token=TOKEN,
                                  devices=["H200"])
        self.assertEqual(response["predictions"][0]["gpu_time_ns"],
                         self.by_device(self.response)["H200"]["gpu_time_ns"])

    def test_unreachable_server(self):
        with self.assertRaises(client.ServiceError) as raised:
            client.list_devices(server="127.0.0.1:1", timeout_s=5)
        self.assertEqual(raised.exception.code, "UNAVAILABLE")

    def test_package_attribute_without_torch_loaded(self):
        # In a fresh interpreter: habitat_agent.client loads, torch does not.
        check = ("import sys; import habitat_agent; habitat_agent.client.messages(); "
                 "assert 'torch' not in sys.modules, 'torch imported'")
        env = dict(os.environ, PYTHONPATH=os.path.dirname(HERE))
        run = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_trace_predict_method(self):
        try:
            from habitat_agent.tracker import Trace
        except ImportError as e:  # no torch or no built extension in this interpreter
            self.skipTest(f"habitat_agent.tracker not importable here: {e}")
        trace = Trace(self.trace, {})
        response = trace.predict(server=self.server.address, devices=["H200"])
        self.assertEqual(response["predictions"][0]["gpu_time_ns"],
                         self.by_device(self.response)["H200"]["gpu_time_ns"])
        self.assertRegex(trace.upload(server=self.server.address), r"^sha256:")

    def assert_table_matches_the_cli(self, trace_path, model_name, runs):
        """Each run: (CLI flags, client.predict arguments, format_table
        arguments); the Python table of the same request is the CLI's
        stdout, and format_warnings its warnings on stderr."""
        if not CLI:
            self.skipTest("HABITAT_CLI not set")
        devices = ["H200", "A100-SXM-40GB", "H100-SXM", "T4", "L4"]
        for cli_flags, call, table in runs:
            with self.subTest(flags=cli_flags):
                cli = subprocess.run(
                    [CLI, "predict", trace_path, "--server", self.server.address, "--catalog",
                     "aws", "--devices", ",".join(devices), *cli_flags],
                    capture_output=True, text=True, timeout=120)
                self.assertEqual(cli.returncode, 0, cli.stderr)
                response = client.predict(trace_path, server=self.server.address, catalog="aws",
                                          devices=devices, **call)
                ours = client.format_table(response, model_name=model_name, precision="fp32",
                                           **table)
                self.assertEqual(ours, cli.stdout)
                explain = "--explain" in cli_flags
                warnings_ = client.format_warnings(
                    response, explain=explain,
                    hint="" if explain else "--explain for the details, -q to hide them")
                self.assertTrue(warnings_, "these traces have warnings")
                self.assertEqual(cli.stderr[cli.stderr.find("warnings"):], warnings_)

    def test_table_matches_the_cli(self):
        self.assert_table_matches_the_cli(TRACE_GZ, self.trace_message.model_name, [
            ([], {}, {}),
            (["--breakdown", "--top", "3", "--spot", "--host-speed", "2", "--batch-size", "32",
              "--explain"],
             {"include_breakdown": True, "price_kind": "spot", "target_host_speed": 2,
              "batch_size": 32},
             {"breakdown": True, "top_operations": 3}),
        ])

    def test_fit_table_matches_the_cli(self):
        """A trace with memory, fitted per GPU: the batch and peak columns,
        the order by cost and the unranked rows are the CLI's too."""
        self.assert_table_matches_the_cli(
            os.path.join(SUITE, "h100_memory", "resnet50_b16_fp32.trace.gz"), "resnet50", [
                (["--fit"], {"fit": True}, {}),
                (["--batch-size", "256"], {"at_batch_size": 256}, {}),
            ])

if __name__ == "__main__":
    unittest.main(verbosity=2)
