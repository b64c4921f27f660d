#!/usr/bin/env python3
"""bench/replay_table.py on hand-made `vram replay --json` rows: the ratios, shares, calls and warm-up it
tables, its comparison with the simulated device, and the input it refuses."""
import copy
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import replay_table  # noqa: E402


def row(trace, policy, reserved, live, seconds, calls, trace_s, warmup=0.0, syncs=0, failed=0, modelled=0.0):
    return {"trace": trace, "policy": policy, "peak_reserved_bytes": reserved, "peak_live_bytes": live,
            "device_call_seconds": seconds, "device_calls": calls, "trace_seconds": trace_s,
            "warmup_driver_seconds": warmup, "synchronizations": syncs, "failed_allocations": failed,
            "modelled_driver_seconds": modelled}


CUDA = [
    row("a.vtrace", "vram", 1050, 1000, {"set_access": 0.002, "mem_map": 0.001},
        {"set_access": 4, "mem_map": 4, "event_record": 2}, 10.0, warmup=0.003),
    row("a.vtrace", "torch-expandable", 1100, 1000, {"mem_map": 0.0005}, {"mem_map": 1}, 10.0),
    row("a.vtrace", "torch-native", 1500, 1000, {"malloc": 0.001}, {"malloc": 1}, 10.0, warmup=0.001),
    row("b.csv.gz", "vram", 2000, 2000, {"set_access": 0.006}, {"set_access": 2}, 100.0),
    row("b.csv.gz", "torch-expandable", 2000, 2000, {}, {}, 100.0),
    row("b.csv.gz", "torch-native", 4000, 2000, {"malloc": 0.002}, {"malloc": 2}, 100.0, failed=1),
]


def sim_rows():
    sim = copy.deepcopy(CUDA)
    # vram on a: modelled 2.5 ms against 3 ms measured (ratio 1.2; 0.5 ms off, within 20% of 3 ms);
    # vram on b: other bytes, modelled 10 ms against 6 ms (not within); expandable on a within (equal);
    # expandable on b made no calls (never within); native on a 2 ms against 1 ms (not); native on b equal.
    for r, m in zip(sim, (0.0025, 0.0005, 0.002, 0.01, 0.0, 0.002)):
        r["modelled_driver_seconds"] = m
    sim[3]["peak_reserved_bytes"] = 2048
    return sim


class ReplayTable(unittest.TestCase):
    def test_the_table_by_hand(self):
        s = replay_table.summarize(CUDA)
        a, b = s["traces"]
        self.assertEqual([a["trace"], b["trace"]], ["a", "b.csv.gz"])
        self.assertEqual(a["reserved_over_live"], {"vram": 1.05, "torch-expandable": 1.1, "torch-native": 1.5})
        self.assertAlmostEqual(a["driver_share"]["vram"], 0.0003)  # 3 ms in 10 s
        self.assertAlmostEqual(a["driver_share"]["torch-expandable"], 0.00005)
        self.assertAlmostEqual(b["driver_share"]["vram"], 0.00006)  # 6 ms in 100 s
        self.assertEqual(b["driver_share"]["torch-expandable"], 0.0)
        self.assertEqual([a["vram_calls"], b["vram_calls"]], [10, 2])  # every kind, events included
        self.assertAlmostEqual(a["warmup_vs_native"], 3.0)
        self.assertIsNone(b["warmup_vs_native"])  # native spent nothing before the peak
        self.assertEqual(s["failed_allocations"], 1)
        self.assertEqual(s["synchronizations"], 0)
        self.assertEqual(s["kinds"]["set_access"]["calls"], 6)
        self.assertAlmostEqual(s["kinds"]["set_access"]["seconds"], 0.008)
        text = replay_table.render(s)
        self.assertIn("| a | 1.0500 | 1.1000 | 1.5000 | 0.030% | 0.005% | 0.010% | 10 | 3.00x |", text)
        self.assertIn("| b.csv.gz | 1.0000 | 1.0000 | 2.0000 | 0.006% | 0.00000% | 0.002% | 2 | - |", text)
        self.assertIn("vram's set_access: 6 calls, 1333.3 us each, 89% of vram's driver time", text)
        self.assertIn("vram's mem_map: 4 calls, 250.0 us each, 11% of vram's driver time", text)

    def test_against_the_simulated_device(self):
        s = replay_table.summarize(CUDA, sim_rows())
        self.assertEqual(s["same_as_sim"], {"vram": [1, 2], "torch-expandable": [2, 2], "torch-native": [2, 2]})
        self.assertAlmostEqual(s["measured_over_model_vram"]["a"], 1.2)
        self.assertAlmostEqual(s["measured_over_model_vram"]["b.csv.gz"], 0.6)
        self.assertEqual(s["within_20_percent"], [3, 6])
        self.assertIn("the model within 20% of the measurement: 3 of 6 replays", replay_table.render(s))

    def test_refusals(self):
        with self.assertRaisesRegex(SystemExit, "no replay of b.csv.gz under torch-native"):
            replay_table.summarize(CUDA[:5])
        with self.assertRaisesRegex(SystemExit, "b.csv.gz under vram is not in the simulated replays"):
            replay_table.summarize(CUDA, sim_rows()[:3])
        with self.assertRaisesRegex(SystemExit, "the replays: a replayed twice under vram"):
            replay_table.summarize(CUDA + [CUDA[0]])
        with self.assertRaisesRegex(SystemExit, "the simulated replays: b.csv.gz replayed twice under torch-native"):
            replay_table.summarize(CUDA, sim_rows() + [sim_rows()[5]])


if __name__ == "__main__":
    unittest.main()
