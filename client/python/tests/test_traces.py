"""habitat_client reading traces: the import itself (no torch, grpc or
protobuf loaded), binary traces and torch.profiler JSON through the CLI."""

import gzip
import os
import stat
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

from client_fixtures import (  # noqa: F401 (puts the package on sys.path)
    PACKAGE_ROOT, habitat_client, _traces, TRACE_GZ, KINETO_GZ, HAVE_PROTOBUF, needs_protobuf,
    raw_trace, no_habitat_cli)


class ImportTest(unittest.TestCase):
    def test_import_loads_no_torch_grpc_or_protobuf(self):
        # In a fresh interpreter: the package is importable where only the
        # trace-reading part can work (the gzip bomb test runs it so).
        check = ("import sys; import habitat_client; "
                 "bad = [m for m in ('torch', 'grpc', 'google.protobuf', 'habitat') "
                 "if m in sys.modules]; assert not bad, bad")
        env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
        run = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)


class TraceReadingTest(unittest.TestCase):
    def test_raw_gzip_path_and_bytes_read_the_same(self):
        raw = raw_trace()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "t.trace")
            with open(path, "wb") as f:
                f.write(raw)
            self.assertEqual(habitat_client.trace_bytes(path), raw)
        self.assertEqual(habitat_client.trace_bytes(TRACE_GZ), raw)
        with open(TRACE_GZ, "rb") as f:
            self.assertEqual(habitat_client.trace_bytes(f.read()), raw)
        self.assertEqual(habitat_client.trace_bytes(bytearray(raw)), raw)
        # Several gzip members, as `cat a.gz b.gz` makes.
        half = len(raw) // 2
        self.assertEqual(habitat_client.trace_bytes(gzip.compress(raw[:half])
                                                    + gzip.compress(raw[half:])), raw)

    def test_bad_input_gives_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "cannot read trace file '/nonexistent"):
            habitat_client.trace_bytes("/nonexistent/x.trace")
        with self.assertRaisesRegex(ValueError, "is empty"):
            habitat_client.trace_bytes(b"  \n")
        with self.assertRaisesRegex(ValueError, "is empty"):
            habitat_client.trace_bytes(gzip.compress(b""))
        with self.assertRaisesRegex(TypeError, "trace must be a path, bytes"):
            habitat_client.trace_bytes(42)
        data = gzip.compress(raw_trace())
        with self.assertRaisesRegex(ValueError, "not valid gzip: the data ends early"):
            habitat_client.trace_bytes(data[:len(data) // 2])
        with self.assertRaisesRegex(ValueError, "not valid gzip: unexpected bytes"):
            habitat_client.trace_bytes(data + b"garbage")

    def test_gzip_bomb_refused_at_the_limit(self):
        bomb = gzip.compress(b"\0" * (1 << 20))
        with self.assertRaisesRegex(ValueError, "inflates to more than 65536 bytes"):
            habitat_client.trace_bytes(bomb, max_bytes=1 << 16)

    @needs_protobuf
    def test_not_a_trace(self):
        with self.assertRaisesRegex(ValueError, "not a habitat trace"):
            habitat_client.load_trace(b"\xff\xff\xff\xff")

    @needs_protobuf
    def test_batch_size(self):
        trace = habitat_client.load_trace(TRACE_GZ)
        self.assertEqual(trace.batch_size, 8)
        self.assertEqual(habitat_client.load_trace(TRACE_GZ, batch_size=8).batch_size, 8)
        with self.assertRaisesRegex(ValueError, "records batch size 8; batch_size=16") as e:
            habitat_client.load_trace(TRACE_GZ, batch_size=16)
        # Other batches are predicted: the message says how.
        self.assertIn("pass at_batch_size=16 to predict", str(e.exception))
        self.assertNotIn("does not predict", str(e.exception))
        for bad in (0, -1, True, "8", 1 << 31):
            with self.assertRaisesRegex(ValueError, "batch_size must be an integer"):
                habitat_client.load_trace(TRACE_GZ, batch_size=bad)
        trace.batch_size = 0  # a trace that records none gets the one given
        self.assertEqual(habitat_client.load_trace(trace, batch_size=4).batch_size, 4)
        self.assertEqual(trace.batch_size, 0, "the caller's message is left alone")


class KinetoTest(unittest.TestCase):
    JSON = b'{"schemaVersion": 1, "traceEvents": []}'

    def fake_cli(self, tmp, exit_code=0, batch_size=0):
        """A `habitat` stand-in: records its arguments and keeps its input,
        then writes a trace as import-kineto would (source "kineto-import")
        or fails."""
        out = os.path.join(tmp, "converted.bin")
        Trace = habitat_client.messages()["Trace"]
        with open(out, "wb") as f:
            f.write(Trace(source="kineto-import", model_name="fake",
                          batch_size=batch_size).SerializeToString())
        script = os.path.join(tmp, "habitat")
        with open(script, "w") as f:  # Python: the tests run it with an empty PATH
            f.write(f"#!{sys.executable}\nimport shutil, sys\n"
                    f"open({os.path.join(tmp, 'args')!r}, 'w').write(' '.join(sys.argv[1:]))\n"
                    f"shutil.copy(sys.argv[2], {os.path.join(tmp, 'input')!r})\n"
                    f"if {exit_code}:\n"
                    f"    sys.exit('bad trace: no kernels')\n"
                    f"shutil.copy({out!r}, sys.argv[3])\n")
        os.chmod(script, os.stat(script).st_mode | stat.S_IXUSR)
        return script

    def test_json_without_a_cli_is_refused_with_the_way_out(self):
        with no_habitat_cli():
            for trace in (self.JSON, gzip.compress(self.JSON)):
                with self.assertRaises(habitat_client.KinetoConversionError) as raised:
                    habitat_client.trace_bytes(trace)
                message = str(raised.exception)
                self.assertIn("torch.profiler (Kineto) JSON trace", message)
                self.assertIn("habitat import-kineto", message)
                self.assertIn("habitat_cli=", message)
            # A ValueError, as the client raised for JSON before it converted.
            self.assertTrue(issubclass(habitat_client.KinetoConversionError, ValueError))

    def test_json_with_a_byte_order_mark_is_json(self):
        bom = b"\xef\xbb\xbf"
        with no_habitat_cli():
            for trace in (bom + self.JSON, gzip.compress(bom + b"\n" * 5000 + self.JSON)):
                with self.assertRaises(habitat_client.KinetoConversionError):
                    habitat_client.trace_bytes(trace)
        self.assertFalse(_traces.is_json(bom + b" \n"))

    def test_not_an_executable(self):
        with self.assertRaisesRegex(habitat_client.KinetoConversionError,
                                    "not an executable file"):
            habitat_client.trace_bytes(self.JSON, habitat_cli="/nonexistent/habitat")

    @needs_protobuf
    def test_converted_by_the_cli(self):
        with tempfile.TemporaryDirectory() as tmp, no_habitat_cli():
            cli = self.fake_cli(tmp)
            trace = habitat_client.load_trace(gzip.compress(self.JSON), batch_size=12,
                                              habitat_cli=cli)
            self.assertEqual((trace.source, trace.model_name, trace.batch_size),
                             ("kineto-import", "fake", 12))
            with open(os.path.join(tmp, "args")) as f:
                args = f.read().split()
            self.assertEqual(args[0], "import-kineto")
            self.assertEqual(args[3:], ["--traced-batch-size", "12"])
            # $HABITAT_CLI is the default.
            with mock.patch.dict(os.environ, {"HABITAT_CLI": cli}):
                self.assertEqual(habitat_client.load_trace(self.JSON, batch_size=3).batch_size, 3)

    @needs_protobuf
    def test_large_json_goes_to_the_importer_unbounded_here(self):
        # JSON inflates to far more than the trace it becomes: the 64 MiB
        # trace bound (here 1 KiB) is not applied to it; the importer's is.
        big = b"\n" * 5000 + b'{"traceEvents": [' + b'{"ph": "X"},' * 10000 + b'{}]}'
        with tempfile.TemporaryDirectory() as tmp:
            cli = self.fake_cli(tmp)
            trace = habitat_client.load_trace(gzip.compress(big), batch_size=2,
                                              habitat_cli=cli, max_bytes=1024)
            self.assertEqual(trace.source, "kineto-import")
            with gzip.open(os.path.join(tmp, "input"), "rb") as f:  # passed on as given
                self.assertEqual(f.read(), big)
        # A binary trace is still bounded.
        with self.assertRaisesRegex(ValueError, "inflates to more than 1024 bytes"):
            habitat_client.trace_bytes(gzip.compress(raw_trace()), max_bytes=1024)

    @needs_protobuf
    def test_kineto_trace_without_shapes_needs_a_batch_size(self):
        with tempfile.TemporaryDirectory() as tmp:
            cli = self.fake_cli(tmp)
            with self.assertRaisesRegex(ValueError, "does not show its batch size.*pass traced_batch_size"):
                habitat_client.load_trace(self.JSON, habitat_cli=cli)

    def test_cli_refusal_carries_its_message(self):
        if not HAVE_PROTOBUF:
            self.skipTest("protobuf not importable here")
        with tempfile.TemporaryDirectory() as tmp:
            cli = self.fake_cli(tmp, exit_code=1)
            with self.assertRaisesRegex(habitat_client.KinetoConversionError,
                                        "refused trace bytes.*bad trace: no kernels"):
                habitat_client.trace_bytes(self.JSON, habitat_cli=cli)

    @needs_protobuf
    def test_real_cli_converts_a_committed_profile(self):
        cli = os.environ.get("HABITAT_CLI")
        if not cli or not os.access(cli, os.X_OK):
            self.skipTest("HABITAT_CLI (the habitat binary) not set")
        trace = habitat_client.load_trace(KINETO_GZ, batch_size=64, habitat_cli=cli)
        self.assertEqual(trace.source, "kineto-import")
        self.assertEqual(trace.batch_size, 64)
        self.assertEqual(trace.model_name, "resnet50_b64_fp32")  # the file's stem
        self.assertGreater(len(trace.operations), 100)
        # Without batch_size the importer infers it from the layers' input
        # shapes and says so through the logger.
        with self.assertLogs("habitat_client", level="WARNING") as logs:
            inferred = habitat_client.load_trace(KINETO_GZ, habitat_cli=cli)
        self.assertEqual(inferred.batch_size, 64)
        self.assertTrue(any("batch size 64 inferred" in line for line in logs.output), logs.output)
        # Each note whole, though the CLI wraps it; no note about the
        # flag's spelling (the client passes --traced-batch-size).
        self.assertTrue(any(line.rstrip().endswith("--traced-batch-size N sets another")
                            for line in logs.output), logs.output)
        with self.assertLogs("habitat_client", level="WARNING") as logs:
            habitat_client.load_trace(KINETO_GZ, batch_size=64, habitat_cli=cli)
        self.assertFalse(any("now spelled" in line for line in logs.output), logs.output)

    def test_notes_are_joined_again(self):
        notes = habitat_client._traces._notes(
            "note: batch size 8 inferred from the\n  leading dimension\n"
            "wrote x.trace\n  not a note\nnote: precision fp32\n")
        self.assertEqual(notes, ["batch size 8 inferred from the leading dimension",
                                 "precision fp32"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
