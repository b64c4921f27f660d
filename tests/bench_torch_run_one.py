#!/usr/bin/env python3
"""bench/torch/run_one.py's step_windows without a GPU or torch: where a run's slow steps lie in time."""
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "torch"))
import run_one  # noqa: E402


class StepWindows(unittest.TestCase):
    def test_slow_steps_bunched_at_the_end_show_in_the_last_window(self):
        # ten steps in five windows of two; the run's median is 10 ms, so a step over 12.5 ms is slow
        w = run_one.step_windows([10.0] * 8 + [30.0, 30.0], n=5)
        self.assertEqual([x["first_step"] for x in w], [0, 2, 4, 6, 8])
        self.assertEqual([x["steps"] for x in w], [2] * 5)
        self.assertEqual([x["median_ms"] for x in w], [10.0, 10.0, 10.0, 10.0, 30.0])
        self.assertEqual([x["slow_steps"] for x in w], [0, 0, 0, 0, 2])

    def test_the_first_windows_take_the_remainder(self):
        # seven steps in three windows: 3, 2 and 2; median 4 ms, slow over 5 ms (5 itself is not slow)
        w = run_one.step_windows([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], n=3)
        self.assertEqual([(x["first_step"], x["steps"]) for x in w], [(0, 3), (3, 2), (5, 2)])
        self.assertEqual([x["median_ms"] for x in w], [2.0, 4.5, 6.5])
        self.assertEqual([x["slow_steps"] for x in w], [0, 0, 2])

    def test_fewer_steps_than_windows_and_none(self):
        w = run_one.step_windows([8.0, 8.0, 20.0])          # the default ten windows, three steps
        self.assertEqual([(x["first_step"], x["steps"], x["slow_steps"]) for x in w], [(0, 1, 0), (1, 1, 0), (2, 1, 1)])
        self.assertEqual(run_one.step_windows([]), [])


if __name__ == "__main__":
    unittest.main()
