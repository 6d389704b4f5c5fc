"""Checks of compare.py's pure functions: no CLI, no GPU.

    python3 -m unittest eval/multi_gpu/test_compare.py
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as c  # noqa: E402


def case(world, step, busy=None, ddp=True, bucket=25.0, status="ok", model="resnet50"):
    out = {"model": model, "batch": 64, "precision": "fp32", "world_size": world,
           "ddp": ddp and world > 1, "bucket_cap_mb": bucket if world > 1 else None,
           "step_ns": {"median": step}, "status": status}
    if busy is not None:
        out["busy_rank0"] = {"median": {"busy_ns": busy}}
    return out


class MeasuredCases(unittest.TestCase):
    def test_groups_ddp_steps_under_their_single_gpu_baseline(self):
        run = {"train": [case(1, 100, busy=95), case(2, 110), case(2, 112, bucket=100.0),
                         case(4, 120)]}
        entry = c.measured_cases(run)[("resnet50", 64, "fp32")]
        self.assertEqual(entry["n1"], 100)
        self.assertTrue(entry["gpu_bound"])
        self.assertEqual(entry["ddp"], {(2, 25.0): 110, (2, 100.0): 112, (4, 25.0): 120})

    def test_gpu_bound_needs_ninety_percent_busy(self):
        run = {"train": [case(1, 100, busy=89), case(2, 110)]}
        self.assertFalse(c.measured_cases(run)[("resnet50", 64, "fp32")]["gpu_bound"])

    def test_failed_cases_and_models_without_a_baseline_are_left_out(self):
        run = {"train": [case(1, 100, busy=95), case(2, 110, status="skipped"),
                         case(2, 130, model="vit")]}
        self.assertEqual(c.measured_cases(run), {})


class Summary(unittest.TestCase):
    def row(self, gpus, predicted, measured, gpu_bound=True, expected=6.0):
        return {"gpus": gpus, "predicted": predicted, "scaled": predicted,
                "measured": measured, "gpu_bound": gpu_bound, "expected_error": expected}

    def test_coverage_counts_steps_within_their_expected_error(self):
        lines = c.coverage([self.row(2, 105, 100), self.row(2, 110, 100),
                            self.row(4, 130, 100, expected=22.0)])
        self.assertEqual(lines[2:], ["| 6.0 | 2 | 1 | 7.5 |", "| 22.0 | 1 | 0 | 30.0 |"])

    def test_goal_is_judged_on_gpu_bound_cases(self):
        lines = c.summary([self.row(2, 105, 100), self.row(2, 150, 100, gpu_bound=False)])
        self.assertIn("| 2 | 2 | 1 | 5.0 / 50.0 / 27.5 | 5.0 / 50.0 / 27.5 | yes |", lines)

    def test_goal_missed_above_ten_percent(self):
        lines = c.summary([self.row(4, 80, 100)])
        self.assertIn("| 4 | 1 | 1 | 20.0 / 0.0 / 20.0 | 20.0 / 0.0 / 20.0 | **no** |", lines)


class HostLink(unittest.TestCase):
    DEVICES = "\n".join([
        'devices {', '  id: "A"', '  interconnect {', '    nvlink: true',
        '    nvls_allreduce_busbw_gbps: 480', '  }', '}',
        'devices {', '  id: "H200"', '  sm_count: 132', '  interconnect {', '    nvlink: true',
        '    allreduce_busbw_gbps: 370', '    nvls_allreduce_busbw_gbps: 479.98', '  }',
        '  tdp_watts: 700', '}'])

    def test_only_the_named_devices_link_becomes_one_host_carried_figure(self):
        out = c.with_host_link(self.DEVICES, "H200", 26.6)
        h200 = out[out.index('id: "H200"'):]
        self.assertIn("nvlink: false", h200)
        self.assertIn("allreduce_busbw_gbps: 26.6", h200)
        self.assertNotIn("nvls", h200)
        self.assertNotIn("370", h200)
        self.assertIn("sm_count: 132", h200)
        self.assertIn("tdp_watts: 700", h200)
        # The other device keeps its NVLink.
        self.assertIn("nvls_allreduce_busbw_gbps: 480", out[:out.index('id: "H200"')])

    def test_the_link_is_the_runs_own_sweep_on_all_its_gpus_at_its_largest_size(self):
        def point(world, size, busbw, dtype="fp32"):
            return {"world_size": world, "bytes": size, "busbw_GBps": busbw, "dtype": dtype}
        sweep = [point(2, 1 << 30, 27.46), point(4, 1 << 20, 14.51), point(4, 1 << 30, 26.6),
                 point(4, 1 << 30, 30.0, dtype="bf16")]
        run = {"environment": {"host": {"variables": {"NCCL_P2P_DISABLE": "1"}}},
               "allreduce_sweep": sweep}
        self.assertEqual(c.host_link_busbw(run), 26.6)
        # A run over NVLink predicts with the device's own link.
        run["environment"]["host"]["variables"] = {"NCCL_NVLS_ENABLE": "0"}
        self.assertIsNone(c.host_link_busbw(run))


if __name__ == "__main__":
    unittest.main()
