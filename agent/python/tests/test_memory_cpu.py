"""The memory the tracker records (habitat.v1.MemoryUsage), on CPU.

Without CUDA the memory stays unknown (None); the CUDA reads are checked
against a stand-in torch.cuda. Needs the extension built (python setup.py
build_ext --inplace in agent/python) and a torch; run from agent/python:
    python -m unittest discover -s tests -v
"""

import unittest
from unittest import mock

import torch

import habitat_agent
from habitat_agent import tracker as tracker_module

GIB = 1 << 30


def fake_cuda(allocated=3 * GIB, peak=7 * GIB, reserved=8 * GIB):
    """Patches torch.cuda as a process that has initialised CUDA sees it;
    the returned dict holds the mocks, to check how they were called."""
    mocks = {
        "is_initialized": mock.Mock(return_value=True),
        "reset_peak_memory_stats": mock.Mock(),
        "memory_allocated": mock.Mock(return_value=allocated),
        "max_memory_allocated": mock.Mock(return_value=peak),
        "max_memory_reserved": mock.Mock(return_value=reserved),
    }
    return mock.patch.multiple(torch.cuda, **mocks), mocks


class MemoryFunctionsTest(unittest.TestCase):
    @unittest.skipIf(torch.cuda.is_initialized(), "CUDA is in use in this process")
    def test_unknown_without_cuda(self):
        self.assertIsNone(tracker_module.memory_at_start())
        self.assertIsNone(tracker_module.memory_usage(None))

    def test_reads_around_a_region(self):
        patch, mocks = fake_cuda()
        with patch:
            start = tracker_module.memory_at_start(0)
            mocks["reset_peak_memory_stats"].assert_called_once_with(0)
            usage = tracker_module.memory_usage(start, 0)
        self.assertEqual(usage, {
            "allocated_bytes_at_start": 3 * GIB,
            "peak_allocated_bytes": 7 * GIB,
            "peak_reserved_bytes": 8 * GIB,
            "source": "recorded",
        })
        mocks["max_memory_allocated"].assert_called_once_with(0)

    def test_zero_allocated_is_known(self):
        patch, _ = fake_cuda(allocated=0)
        with patch:
            start = tracker_module.memory_at_start()
        self.assertEqual(start, {"allocated_bytes_at_start": 0})


class TrackedMemoryTest(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(8, 4)
        self.x = torch.randn(2, 8)

    def track(self):
        tracker = habitat_agent.OperationTracker(source="host", batch_size=2, verbose=False)
        with tracker.track():
            self.lin(self.x).sum().backward()
        return tracker

    def test_before_tracking_it_is_an_error(self):
        tracker = habitat_agent.OperationTracker(source="host", batch_size=2)
        with self.assertRaises(habitat_agent.TrackingError):
            tracker.memory_usage()

    @unittest.skipIf(torch.cuda.is_initialized(), "CUDA is in use in this process")
    def test_cpu_run_leaves_memory_unknown(self):
        self.assertIsNone(self.track().memory_usage())

    def test_peaks_are_reset_when_tracking_begins_and_read_at_the_end(self):
        patch, mocks = fake_cuda()
        events = []
        mocks["reset_peak_memory_stats"].side_effect = lambda *a: events.append("reset")
        mocks["max_memory_allocated"].side_effect = (
            lambda *a: events.append("peak") or 7 * GIB)
        with patch:
            tracker = habitat_agent.OperationTracker(source="host", batch_size=2, verbose=False)
            with tracker.track():
                events.append("step")
                self.lin(self.x).sum().backward()
        self.assertEqual(events, ["reset", "step", "peak"])
        memory = tracker.memory_usage()
        self.assertEqual(memory["allocated_bytes_at_start"], 3 * GIB)
        self.assertEqual(memory["peak_allocated_bytes"], 7 * GIB)
        self.assertEqual(memory["peak_reserved_bytes"], 8 * GIB)
        self.assertEqual(memory["source"], "recorded")

    def test_each_region_records_its_own(self):
        patch, _ = fake_cuda(peak=7 * GIB)
        with patch:
            tracker = self.track()
        self.assertEqual(tracker.memory_usage()["peak_allocated_bytes"], 7 * GIB)
        if not torch.cuda.is_initialized():
            with tracker.track():
                self.lin(self.x).sum().backward()
            self.assertIsNone(tracker.memory_usage())


if __name__ == "__main__":
    unittest.main()
