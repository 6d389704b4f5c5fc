"""habitat_client.Client without a server: retries, requests and their
arguments, uploads, and the agent's dict-returning habitat_agent.client."""

import contextlib
import io
import json
import logging
import os
import sys
import unittest
import warnings

from client_fixtures import (  # noqa: F401 (puts the package on sys.path)
    SOURCE, habitat_client, TRACE_GZ, HAVE_GRPC, needs_grpc, raw_trace, sample_response)


@needs_grpc
class RetryTest(unittest.TestCase):
    """UNAVAILABLE is retried by gRPC's retry policy, which marks retried
    attempts with grpc-previous-rpc-attempts (a hand-written loop does not);
    other codes are the server's answer and are not retried."""

    def flaky_server(self, code, failures):
        import grpc
        from concurrent import futures
        calls, marked = [], []

        def list_devices(request, context):
            if any(k == "grpc-previous-rpc-attempts" for k, _ in context.invocation_metadata()):
                marked.append(1)
            calls.append(1)
            if len(calls) <= failures:
                context.abort(code, "flaky")
            return b""  # an empty ListDevicesResponse

        handler = grpc.method_handlers_generic_handler("habitat.v1.PredictionService", {
            "ListDevices": grpc.unary_unary_rpc_method_handler(list_devices)})
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler])
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        return f"127.0.0.1:{port}", calls, marked

    @unittest.skipUnless(HAVE_GRPC, "grpc not importable here")
    def test_unavailable_is_retried_by_grpc(self):
        import grpc
        address, calls, marked = self.flaky_server(grpc.StatusCode.UNAVAILABLE, 2)
        with habitat_client.Client(address, max_attempts=3, timeout_s=10) as client:
            self.assertEqual(client.list_devices(), [])
        self.assertEqual(len(calls), 3)
        self.assertEqual(len(marked), 2)

    @unittest.skipUnless(HAVE_GRPC, "grpc not importable here")
    def test_attempts_are_bounded_and_other_codes_not_retried(self):
        import grpc
        address, calls, _ = self.flaky_server(grpc.StatusCode.UNAVAILABLE, 100)
        with habitat_client.Client(address, max_attempts=2, timeout_s=10) as client:
            with self.assertRaisesRegex(habitat_client.ServiceError, "up to 2 attempts"):
                client.list_devices()
        self.assertEqual(len(calls), 2)
        address, calls, _ = self.flaky_server(grpc.StatusCode.INVALID_ARGUMENT, 1)
        with habitat_client.Client(address, max_attempts=3, timeout_s=10) as client:
            with self.assertRaises(habitat_client.ServiceError) as raised:
                client.list_devices()
        self.assertEqual(raised.exception.code, "INVALID_ARGUMENT")
        self.assertEqual(len(calls), 1)

    @unittest.skipUnless(HAVE_GRPC, "grpc not importable here")
    def test_service_config(self):
        from habitat_client import _client
        self.assertEqual(_client.retry_service_config(1), "{}")
        policy = json.loads(_client.retry_service_config(3))["methodConfig"][0]["retryPolicy"]
        self.assertEqual(policy["maxAttempts"], 3)
        self.assertEqual(policy["retryableStatusCodes"], ["UNAVAILABLE"])
        with self.assertRaisesRegex(ValueError, "gRPC's limit"):
            habitat_client.Client("127.0.0.1:1", max_attempts=6)


class ClientTest(unittest.TestCase):
    """Client.predict with the RPC replaced: request built, result typed,
    warnings reported."""

    def setUp(self):
        self.client = habitat_client.Client("127.0.0.1:1")  # never connected
        self.sent = []

        def call(method, request, response_type):
            self.sent.append((method, request, response_type))
            return sample_response()

        self.client._call = call

    def tearDown(self):
        self.client.close()

    def test_predict(self):
        log = io.StringIO()
        handler = logging.StreamHandler(log)
        logger = logging.getLogger("habitat_client")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            with warnings.catch_warnings(record=True) as caught, \
                    contextlib.redirect_stdout(io.StringIO()) as out, \
                    contextlib.redirect_stderr(io.StringIO()) as err:
                warnings.simplefilter("always")
                result = self.client.predict(TRACE_GZ, devices=["H200", "T4"], catalog="aws",
                                             price_kind="spot", target_host_speed=2)
        finally:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
        self.assertIsInstance(result, habitat_client.PredictionResult)
        method, request, response_type = self.sent[0]
        self.assertEqual((method, response_type), ("Predict", "PredictResponse"))
        self.assertEqual(list(request.devices), ["H200", "T4"])
        self.assertEqual(request.catalog, "aws")
        self.assertEqual(request.price_kind, 2)  # PRICE_KIND_SPOT in device.proto
        self.assertEqual(request.target_host_speed, 2.0)
        self.assertEqual(request.batch_size, 0)  # the trace's own
        self.assertEqual(request.trace.SerializeToString(),
                         habitat_client.messages()["Trace"].FromString(raw_trace())
                         .SerializeToString())
        # The response's warning through warnings, each device's once through logging.
        self.assertEqual([(w.category, str(w.message)) for w in caught],
                         [(habitat_client.PredictionWarning, "the trace has no host timeline")])
        self.assertEqual(log.getvalue(), "T4, H200: old GPU\n")
        self.assertEqual((out.getvalue(), err.getvalue()), ("", ""), "nothing printed")

    def test_fit(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client.predict(TRACE_GZ, fit=True)
            self.client.predict(trace_id="sha256:" + "0" * 64, fit=True, fit_batch_step=48)
            self.client.predict(TRACE_GZ)
        fit, stepped, plain = (sent[1] for sent in self.sent)
        self.assertTrue(fit.HasField("fit"), "set even with the default step")
        self.assertEqual((fit.fit.batch_step, fit.batch_size), (0, 0))
        self.assertTrue(stepped.HasField("fit"))
        self.assertEqual(stepped.fit.batch_step, 48)
        self.assertFalse(plain.HasField("fit"))
        request = habitat_client.build_predict_request(TRACE_GZ, fit=True, fit_batch_step=1)
        self.assertEqual(request.fit.batch_step, 1)

    def test_the_traced_batch_is_traced_batch_size(self):
        # As the CLI: the trace's own batch is traced_batch_size (the CLI's
        # --traced-batch-size), the batch to predict at at_batch_size.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            request = habitat_client.build_predict_request(TRACE_GZ, traced_batch_size=8,
                                                           at_batch_size=16)
        self.assertEqual((request.trace.batch_size, request.batch_size), (8, 16))
        with self.assertWarnsRegex(DeprecationWarning, "now spelled traced_batch_size="):
            old = habitat_client.build_predict_request(TRACE_GZ, batch_size=8)
        self.assertEqual(old.trace.batch_size, 8)
        with self.assertRaisesRegex(ValueError, "traced_batch_size alone"):
            habitat_client.build_predict_request(TRACE_GZ, batch_size=8, traced_batch_size=8)

    def test_another_batch_is_asked_for_by_id_too(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client.predict(trace_id="sha256:" + "0" * 64, at_batch_size=128)
        self.assertEqual(self.sent[0][1].batch_size, 128)

    def test_parallel_request(self):
        build = habitat_client.build_predict_request
        request = build(TRACE_GZ)
        self.assertEqual((len(request.parallel), request.catalog_instances), (0, False))
        request = build(TRACE_GZ, gpus_per_node=8)
        self.assertEqual([(c.gpus_per_node, c.nodes, c.bucket_cap_bytes)
                          for c in request.parallel], [(8, 0, 0)])  # 0: one node, DDP's 25 MiB
        request = build(trace_id="sha256:0", gpus_per_node=8, nodes=2, bucket_cap_mb=50,
                        catalog_instances=True)
        self.assertEqual([(c.gpus_per_node, c.nodes, c.bucket_cap_bytes)
                          for c in request.parallel], [(8, 2, 50 << 20)])
        self.assertTrue(request.catalog_instances)
        request = build(TRACE_GZ, catalog_instances=True)
        self.assertEqual((len(request.parallel), request.catalog_instances), (0, True))
        request = build(TRACE_GZ, gpus_per_node=64, nodes=4096, bucket_cap_mb=1 << 20)
        self.assertEqual((request.parallel[0].gpus_per_node, request.parallel[0].nodes,
                          request.parallel[0].bucket_cap_bytes), (64, 4096, 1 << 40))
        request = build(TRACE_GZ, gpus_per_node=1, nodes=1, bucket_cap_mb=1)
        self.assertEqual((request.parallel[0].nodes, request.parallel[0].bucket_cap_bytes,
                          request.parallel[0].disable_nvls), (1, 1 << 20, False))
        request = build(TRACE_GZ, gpus_per_node=8, disable_nvls=True)
        self.assertTrue(request.parallel[0].disable_nvls)
        self.assertEqual(request.parallel[0].kind, 0)  # DDP unless asked
        request = build(TRACE_GZ, gpus_per_node=4, parallel="FSDP", fsdp_units=24)
        self.assertEqual((request.parallel[0].kind, request.parallel[0].fsdp_units),
                         (type(request.parallel[0]).KIND_FULLY_SHARDED, 24))
        request = build(TRACE_GZ, gpus_per_node=4, parallel="fsdp", fsdp_wrap="GPT2Block")
        self.assertEqual((request.parallel[0].fsdp_wrap, request.parallel[0].fsdp_units),
                         ("GPT2Block", 0))
        # Through Client.predict and predict_message.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.client.predict(TRACE_GZ, gpus_per_node=4, nodes=3, bucket_cap_mb=10,
                                catalog_instances=True)
            self.client.predict_message(trace_id="sha256:0", gpus_per_node=2)
        sent, by_message = self.sent[0][1], self.sent[1][1]
        self.assertEqual((sent.parallel[0].gpus_per_node, sent.parallel[0].nodes,
                          sent.parallel[0].bucket_cap_bytes, sent.catalog_instances),
                         (4, 3, 10 << 20, True))
        self.assertEqual((by_message.parallel[0].gpus_per_node, by_message.catalog_instances),
                         (2, False))

    def test_request_arguments_are_checked(self):
        cases = [
            (dict(trace=TRACE_GZ, price_kind="cheap"), "price_kind must be"),
            (dict(trace=TRACE_GZ, target_host_speed=1000), "target_host_speed must be within"),
            (dict(trace=TRACE_GZ, devices=[""]), "non-empty device ids"),
            (dict(), "exactly one of trace and trace_id"),
            (dict(trace=TRACE_GZ, trace_id="sha256:0"), "exactly one of trace and trace_id"),
            (dict(trace_id="sha256:0", batch_size=8), "batch_size applies to a trace"),
            (dict(trace=TRACE_GZ, at_batch_size=0), "at_batch_size must be an integer"),
            (dict(trace=TRACE_GZ, at_batch_size=2.5), "at_batch_size must be an integer"),
            (dict(trace=TRACE_GZ, at_batch_size=1 << 31), "at_batch_size must be an integer"),
            (dict(trace=TRACE_GZ, fit_batch_step=8), "pass fit=True with it"),
            (dict(trace=TRACE_GZ, fit=False, fit_batch_step=8), "pass fit=True with it"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=0), "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=-8),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=(1 << 30) + 1),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=8.0),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, fit_batch_step=True),
             "fit_batch_step must be an integer"),
            (dict(trace=TRACE_GZ, fit=True, at_batch_size=64), "drop at_batch_size"),
            (dict(trace_id="sha256:0", fit=True, at_batch_size=64), "drop at_batch_size"),
            (dict(trace=TRACE_GZ, fit=1), "fit must be True or False"),
            (dict(trace=TRACE_GZ, fit=64), "fit must be True or False"),
            (dict(trace=TRACE_GZ, nodes=2), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, bucket_cap_mb=25), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, disable_nvls=True), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, parallel="fsdp"), "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, gpus_per_node=4, parallel="tp"), "not modelled"),
            (dict(trace=TRACE_GZ, gpus_per_node=4, fsdp_units=8), "pass parallel='fsdp'"),
            (dict(trace=TRACE_GZ, gpus_per_node=4, parallel="fsdp", fsdp_units=0),
             r"fsdp_units must be an integer within \[1, 4096\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=4, fsdp_wrap="Block"), "pass parallel='fsdp'"),
            (dict(trace=TRACE_GZ, gpus_per_node=4, parallel="fsdp", fsdp_wrap=""),
             "fsdp_wrap must be a module class name"),
            (dict(trace=TRACE_GZ, gpus_per_node=4, parallel="fsdp", fsdp_wrap="Block",
                  fsdp_units=8), "give one of them"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, disable_nvls=1),
             "disable_nvls must be True or False"),
            (dict(trace=TRACE_GZ, nodes=2, bucket_cap_mb=25, catalog_instances=True),
             "give gpus_per_node too"),
            (dict(trace=TRACE_GZ, gpus_per_node=0), r"gpus_per_node must be an integer within "
             r"\[1, 64\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=65), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8.0), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node="8"), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=True), "gpus_per_node must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=0),
             r"nodes must be an integer within \[1, 4096\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=4097), "nodes must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=-1), "nodes must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, nodes=True), "nodes must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, bucket_cap_mb=0),
             r"bucket_cap_mb must be an integer within \[1, 1048576\]"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, bucket_cap_mb=(1 << 20) + 1),
             "bucket_cap_mb must be an integer"),
            (dict(trace=TRACE_GZ, gpus_per_node=8, bucket_cap_mb=2.5),
             "bucket_cap_mb must be an integer"),
            (dict(trace=TRACE_GZ, catalog_instances=1), "catalog_instances must be True or False"),
            (dict(trace=TRACE_GZ, catalog_instances="yes"),
             "catalog_instances must be True or False"),
        ]
        for kwargs, message in cases:
            with self.subTest(kwargs=kwargs):
                with self.assertRaisesRegex(ValueError, message):
                    self.client.predict(**kwargs)
        self.assertEqual(self.sent, [])

    def test_predict_by_id_and_upload(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", habitat_client.PredictionWarning)
            self.client.predict(trace_id="sha256:abc", devices="H200")
        request = self.sent[0][1]
        self.assertEqual((request.WhichOneof("trace_source"), request.trace_id),
                         ("trace_id", "sha256:abc"))
        self.client._call = lambda method, request, response_type: self.sent.append(
            (method, request)) or habitat_client.messages()["UploadTraceResponse"](
                trace_id="sha256:def")
        self.assertEqual(self.client.upload(TRACE_GZ), "sha256:def")
        self.assertEqual(self.sent[-1][0], "UploadTrace")
        self.assertEqual(self.sent[-1][1].trace.batch_size, 8)

    def test_connection_arguments(self):
        with self.assertRaisesRegex(ValueError, "server must be 'host:port'"):
            habitat_client.Client("")
        with self.assertRaisesRegex(ValueError, "tls_cert and tls_key go together"):
            habitat_client.Client("localhost:1", tls_cert="x.pem")
        connection, call = habitat_client.split_connection_args(
            {"token": "t", "habitat_cli": "/bin/habitat", "devices": ["H200"]})
        self.assertEqual(connection, {"token": "t", "habitat_cli": "/bin/habitat"})
        self.assertEqual(call, {"devices": ["H200"]})

    def test_agent_module_keeps_returning_dicts(self):
        sys.path.insert(0, os.path.join(SOURCE, "agent", "python"))
        try:
            from habitat_agent import client as legacy
        finally:
            sys.path.pop(0)
        self.assertIs(legacy.ServiceError, habitat_client.ServiceError)
        with legacy.Client("127.0.0.1:1") as c:
            c._call = lambda *args: sample_response()
            response = c.predict(TRACE_GZ)
        self.assertIsInstance(response, dict)
        self.assertEqual(response["predictions"][1]["device_id"], "H200")
        self.assertEqual(response["price_kind"], "PRICE_KIND_SPOT")


if __name__ == "__main__":
    unittest.main(verbosity=2)
