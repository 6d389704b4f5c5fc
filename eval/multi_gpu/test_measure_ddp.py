"""Checks of measure_ddp.py's pure functions: no torch, no GPU.

    python3 -m unittest eval/multi_gpu/test_measure_ddp.py
"""

import gzip
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_ddp as m  # noqa: E402


class Bandwidth(unittest.TestCase):
    def test_bus_factor_is_nccl_tests_formula(self):
        self.assertEqual(m.allreduce_bus_factor(1), 0.0)
        self.assertEqual(m.allreduce_bus_factor(2), 1.0)
        self.assertEqual(m.allreduce_bus_factor(4), 1.5)
        self.assertEqual(m.allreduce_bus_factor(8), 1.75)
        with self.assertRaises(ValueError):
            m.allreduce_bus_factor(0)

    def test_algbw_and_busbw(self):
        # 1 GiB in 3.2 ms: 335.5 GB/s algbw (GB = 1e9 B, as nccl-tests).
        nbytes, t = 1 << 30, 3_200_000
        self.assertAlmostEqual(m.algbw_gbps(nbytes, t), 335.544, places=2)
        self.assertAlmostEqual(m.busbw_gbps(nbytes, t, 2), 335.544, places=2)
        self.assertAlmostEqual(m.busbw_gbps(nbytes, t, 8), 335.544 * 1.75, places=2)
        with self.assertRaises(ValueError):
            m.algbw_gbps(1, 0)

    def test_fit_recovers_latency_and_bandwidth(self):
        lat, bw = 12_000.0, 300.0  # ns, GB/s (bytes/ns)
        pts = [(b, lat + b / bw) for b in m.sweep_sizes(1024, 1 << 30)]
        got_lat, got_bw = m.fit_latency_bandwidth(pts)
        self.assertAlmostEqual(got_lat, lat, delta=1.0)
        self.assertAlmostEqual(got_bw, bw, delta=0.01)

    def test_fit_needs_two_sizes(self):
        with self.assertRaises(ValueError):
            m.fit_latency_bandwidth([(1024, 10.0)])
        with self.assertRaises(ValueError):
            m.fit_latency_bandwidth([(1024, 10.0), (1024, 11.0)])


class Statistics(unittest.TestCase):
    def test_median_and_percentiles(self):
        self.assertEqual(m.median([3, 1, 2]), 2)
        self.assertEqual(m.median([4, 1, 3, 2]), 2.5)
        self.assertEqual(m.percentile([10, 20, 30, 40, 50], 10), 14.0)
        self.assertEqual(m.percentile([10, 20, 30, 40, 50], 90), 46.0)
        with self.assertRaises(ValueError):
            m.median([])

    def test_summary(self):
        s = m.summarize_ns([5, 1, 3])
        self.assertEqual((s["median"], s["min"], s["max"], s["count"]), (3, 1, 5, 3))

    def test_slowest_rank_per_iteration_then_median(self):
        rank0 = [10, 30, 20]
        rank1 = [12, 25, 40]
        step = m.per_iteration_max([rank0, rank1])
        self.assertEqual(step, [12, 30, 40])
        self.assertEqual(m.median(step), 30)
        with self.assertRaises(ValueError):
            m.per_iteration_max([[1, 2], [1]])

    def test_busy_breakdown(self):
        # compute 0-10 and 20-30; comm 5-25: busy 0-30, exposed 10-20.
        ivs = [(0, 10, False), (20, 30, False), (5, 25, True)]
        b = m.busy_breakdown(ivs)
        self.assertEqual(b["busy_ns"], 30)
        self.assertEqual(b["compute_busy_ns"], 20)
        self.assertEqual(b["comm_busy_ns"], 20)
        self.assertEqual(b["exposed_comm_ns"], 10)
        self.assertEqual(b["overlap_ns"], 10)
        self.assertEqual(b["gpu_span_ns"], 30)
        self.assertEqual((b["kernels"], b["comm_kernels"]), (3, 1))
        self.assertEqual(m.busy_breakdown([])["busy_ns"], 0)

    def test_comm_kernel_names(self):
        self.assertTrue(m.is_comm_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"))
        self.assertTrue(m.is_comm_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"))
        self.assertFalse(m.is_comm_kernel("sm90_xmma_gemm_bf16bf16_bf16f32"))


class Sweep(unittest.TestCase):
    def test_sizes(self):
        sizes = m.sweep_sizes(1024, 1 << 30)
        self.assertEqual((sizes[0], sizes[-1], len(sizes)), (1024, 1 << 30, 21))
        self.assertEqual(m.sweep_sizes(1024, 1 << 20, 4), [1024, 4096, 16384, 65536, 262144, 1 << 20])
        with self.assertRaises(ValueError):
            m.sweep_sizes(0, 10)

    def test_inner_ops(self):
        self.assertEqual(m.inner_ops_for(1024), 20)
        self.assertEqual(m.inner_ops_for(16 << 20), 4)
        self.assertEqual(m.inner_ops_for(1 << 30), 1)

    def test_rows_and_constants(self):
        def entry(nbytes, samples):
            return {"dtype": "fp32", "bytes": nbytes, "elements": nbytes // 4,
                    "inner_ops": 1, "samples_ns": samples}
        lat, bw = 10_000.0, 200.0
        sizes = m.sweep_sizes(1024, 1 << 28)
        rank0 = [entry(b, [lat + b / bw] * 5) for b in sizes]
        # Rank 1 is slower on one sample: the slowest rank counts.
        rank1 = [entry(b, [lat + b / bw] * 4 + [2 * (lat + b / bw)]) for b in sizes]
        rows = m.sweep_rows(2, [rank0, rank1])
        self.assertEqual(len(rows), len(sizes))
        last = rows[-1]
        self.assertAlmostEqual(last["busbw_GBps"], (1 << 28) / (lat + (1 << 28) / bw), places=2)
        self.assertEqual(last["time_ns"]["max"], int(round(2 * (lat + (1 << 28) / bw))))
        (c,) = m.link_constants(rows)
        self.assertAlmostEqual(c["fit_latency_ns"], lat, delta=1.0)
        self.assertAlmostEqual(c["fit_busbw_GBps"], bw, delta=0.01)  # factor 1 at n=2
        self.assertEqual(c["peak_busbw_bytes"], 1 << 28)


class Planning(unittest.TestCase):
    def test_plan_order_and_ids(self):
        plan = m.build_plan(["resnet50", "gnmt"], ["fp32", "bf16"], [1, 2, 4], [25, 100],
                            m.BATCH, profile_steps=3)
        ids = [c["id"] for c in plan]
        self.assertEqual(ids[:4], ["sweep_n2", "sweep_n4", "interference_n2", "interference_n4"])
        # Model-major: every resnet50 case before any gnmt case.
        first_gnmt = next(i for i, c in enumerate(plan) if c.get("model") == "gnmt")
        self.assertTrue(all(c.get("model") != "resnet50" for c in plan[first_gnmt:]))
        self.assertIn("train_resnet50_b64_fp32_n1", ids)
        self.assertIn("train_resnet50_b64_bf16_n4_bucket100", ids)
        self.assertEqual(len(ids), len(set(ids)))
        # 4 link cases + 2 models x 2 precisions x (1 + 2 sizes x 2 buckets).
        self.assertEqual(len(plan), 4 + 2 * 2 * 5)
        profiled = [c["id"] for c in plan if c.get("profile_steps")]
        self.assertIn("train_gnmt_b64_fp32_n2_bucket25", profiled)
        self.assertNotIn("train_gnmt_b64_fp32_n2_bucket100", profiled)
        self.assertIn("train_gnmt_b64_fp32_n1", profiled)

    def test_plan_single_gpu(self):
        plan = m.build_plan(["dcgan"], ["fp32"], [1], [25], m.BATCH, profile_steps=0)
        self.assertEqual([c["id"] for c in plan], ["train_dcgan_b128_fp32_n1"])
        self.assertFalse(plan[0]["ddp"])

    def test_world_sizes_present(self):
        self.assertEqual(m.present_world_sizes([1, 2, 4], 2), [1, 2])
        self.assertEqual(m.present_world_sizes([4, 1, 2], 8), [1, 2, 4])
        self.assertEqual(m.present_world_sizes([1, 2], 0), [])

    def test_parsers(self):
        self.assertEqual(m.parse_bytes("1K"), 1024)
        self.assertEqual(m.parse_bytes("1GiB"), 1 << 30)
        self.assertEqual(m.parse_bytes("4096"), 4096)
        with self.assertRaises(ValueError):
            m.parse_bytes("lots")
        self.assertEqual(m.parse_int_list("1,2+4"), [1, 2, 4])
        b = m.parse_batches("resnet50=32", ["resnet50", "gpt2"])
        self.assertEqual(b, {"resnet50": 32, "gpt2": 16})
        with self.assertRaises(ValueError):
            m.parse_batches("vit=x", ["vit"])
        self.assertEqual(m.gpu_tag_from_name("NVIDIA H100 80GB HBM3"), "h100")
        self.assertEqual(m.gpu_tag_from_name("NVIDIA H200"), "h200")
        self.assertEqual(m.gpu_tag_from_name("NVIDIA A100-SXM4-80GB"), "a100")


class Budget(unittest.TestCase):
    def test_should_start(self):
        self.assertTrue(m.should_start(now=0, deadline=100, expected_s=10))
        self.assertFalse(m.should_start(now=95, deadline=100, expected_s=10))
        # Fits only with the margin left over.
        self.assertFalse(m.should_start(now=0, deadline=11, expected_s=10))
        self.assertTrue(m.should_start(now=0, deadline=11.5, expected_s=10))
        # Never with less than MIN_CASE_S left, however short the case.
        self.assertFalse(m.should_start(now=0, deadline=m.MIN_CASE_S - 1, expected_s=0.1))

    def test_expected_from_history(self):
        case = {"kind": "train", "model": "gpt2"}
        self.assertEqual(m.expected_case_s({}, case), m.DEFAULT_CASE_S["train"])
        self.assertEqual(m.expected_case_s({"gpt2": [4.0, 17.0, 6.0]}, case), 17.0)
        self.assertEqual(m.expected_case_s({}, {"kind": "sweep"}), m.DEFAULT_CASE_S["sweep"])

    def test_split_budget(self):
        self.assertEqual(m.split_budget(1000, 400, False, 150), (1400, 1400))
        self.assertEqual(m.split_budget(1000, 400, True, 150), (1250, 1400))
        # The reserve never takes more than half the budget.
        self.assertEqual(m.split_budget(0, 100, True, 150), (50, 100))


class Assembly(unittest.TestCase):
    def train(self, id_, n, median, status="ok", model="resnet50", bucket=None):
        return {"id": id_, "kind": "train", "model": model, "precision": "fp32",
                "world_size": n, "bucket_cap_mb": bucket, "status": status,
                "step_ns": {"median": median}}

    def test_scaling_against_baseline(self):
        rows = m.scaling_rows([self.train("a", 1, 100), self.train("b", 2, 125, bucket=25),
                               self.train("c", 2, 0, status="failed"),
                               self.train("d", 2, 50, model="vit", bucket=25)])
        self.assertEqual(len(rows), 1)
        self.assertEqual((rows[0]["efficiency"], rows[0]["added_ns"]), (0.8, 25))

    def test_assemble_lists_what_was_not_measured(self):
        cfg = {"plan": [{"id": "a"}, {"id": "b"}, {"id": "z"}], "state": "/tmp", "models": []}
        recs = [self.train("a", 1, 100), {"id": "b", "kind": "train", "status": "skipped",
                                           "error": "time budget"}]
        doc = m.assemble(cfg, recs, {"command": "x"})
        self.assertEqual([r["id"] for r in doc["train"]], ["a"])
        self.assertEqual({r["id"]: r["status"] for r in doc["not_measured"]},
                         {"b": "skipped", "z": "not reached"})
        self.assertNotIn("plan", doc["config"])
        self.assertEqual(doc["schema"], m.SCHEMA)

    def test_jsonl_and_gzip_output(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "r.jsonl"
            m.append_jsonl(p, {"id": "a"})
            with open(p, "a") as f:
                f.write('{"id": "cut')  # a kill mid-line
            self.assertEqual(m.read_jsonl(p), [{"id": "a"}])
            out = Path(d) / "o.json.gz"
            m.write_json(out, {"x": 1})
            with gzip.open(out) as f:
                self.assertEqual(json.load(f), {"x": 1})

    def test_merge_train_case_from_rank_results(self):
        case = {"id": "train_resnet50_b64_fp32_n2_bucket25", "kind": "train",
                "model": "resnet50", "batch": 64, "precision": "fp32", "n": 2,
                "ddp": True, "bucket_mb": 25.0, "profile_steps": 3}
        busy = {"median": {"busy_ns": 9, "exposed_comm_ns": 1}}
        r0 = {"wall_ns": [100, 120, 110], "host_ns_median": 5, "params": {"tensors": 3},
              "peak_memory_allocated_bytes": 10, "seconds": {"build": 1}, "busy": busy,
              "ddp_logging": [{"bucket_sizes": "1, 2"}]}
        r1 = {"wall_ns": [105, 115, 130], "host_ns_median": 6, "params": {"tensors": 3},
              "peak_memory_allocated_bytes": 12, "seconds": {"build": 1}}
        rec = m.merge_case(case, [r0, r1, None, None], 4.2)
        self.assertEqual(rec["status"], "ok")
        self.assertEqual(rec["step_ns_samples"], [105, 120, 130])
        self.assertEqual(rec["step_ns"]["median"], 120)
        self.assertEqual((rec["global_batch"], rec["world_size"]), (128, 2))
        self.assertEqual(rec["peak_memory_allocated_bytes"], 12)
        self.assertEqual(rec["busy_rank0"], busy)
        self.assertAlmostEqual(rec["samples_per_s"], 128 / 120e-9, places=0)
        self.assertTrue(m.describe(rec).startswith(f"ok   {case['id']}: 0.00 ms"))

    def test_merge_failed_and_sweep_cases(self):
        case = {"id": "sweep_n2", "kind": "sweep", "n": 2}
        rec = m.merge_case(case, [{"error": "RuntimeError: x", "traceback": "tb"}, None], 1.0)
        self.assertEqual((rec["status"], rec["error"]), ("failed", "RuntimeError: x"))
        self.assertTrue(m.describe(rec).startswith("FAILED"))
        entries = [{"dtype": "bf16", "bytes": b, "elements": b // 2, "inner_ops": 1,
                    "samples_ns": [1000 + b / 100.0] * 3} for b in (1024, 1 << 20, 1 << 24)]
        rec = m.merge_case(case, [{"sweep": entries}, {"sweep": entries}], 2.0)
        self.assertEqual(rec["status"], "ok")
        self.assertEqual(len(rec["rows"]), 3)
        self.assertEqual(rec["link_constants"][0]["dtype"], "bf16")
        self.assertIn("peak busbw", m.describe(rec))

    def test_unprofiled_case_says_so(self):
        rec = {"id": "x", "kind": "train", "status": "ok", "seconds": 1,
               "step_ns": {"median": 2e6, "p10": 1e6, "p90": 3e6}, "busy_rank0": None}
        self.assertIn("not profiled", m.describe(rec))

    def test_nccl_log_digest_collapses_channels(self):
        with tempfile.TemporaryDirectory() as d:
            lines = ["vm:1:2 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
                     "vm:1:2 [0] NCCL INFO unrelated line"]
            lines += [f"vm:1:2 [0] NCCL INFO Channel {i:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM"
                      for i in range(24)]
            (Path(d) / "nccl.vm.1.log").write_text("\n".join(lines) + "\n")
            got = m.nccl_log_digest(Path(d))
        self.assertEqual(len(got), 2)
        self.assertTrue(got[0].endswith("NCCL version 2.28.9+cuda13.0"))
        self.assertTrue(got[1].endswith("via P2P/CUMEM (x24)"))

    def test_launch_is_one_torchrun_of_the_largest_n(self):
        cmd = m.launch_command(4, Path("/tmp/s"))
        self.assertIn("torch.distributed.run", cmd)
        self.assertIn("--nproc_per_node=4", cmd)
        self.assertEqual(cmd[-3:], ["worker", "--state", "/tmp/s"])

    def test_nvls_stays_off_unless_asked(self):
        class A:
            allow_nvls = False
        env = m.child_env(A(), Path("/tmp"))
        self.assertEqual(env["NCCL_NVLS_ENABLE"], "0")
        self.assertEqual(env["TORCH_SYMM_MEM_DISABLE_MULTICAST"], "1")


if __name__ == "__main__":
    unittest.main()
