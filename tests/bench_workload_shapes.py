#!/usr/bin/env python3
"""bench/workload_shapes.py: the traces of giant, growing, two_stream and diffusion are well formed (each free
names a live block, with its size), have the numbers of events their loops make and say what the shape says
(counted here by hand), and a seed gives the same trace."""
import csv
import gzip
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import workload_shapes  # noqa: E402


def write(shape, seed, folder):
    path = Path(folder) / f"{shape}{seed}.csv.gz"
    t = workload_shapes.Trace(str(path))
    workload_shapes.SHAPES[shape](workload_shapes.random.Random(seed), t)
    t.write()
    with gzip.open(path, "rt") as f:
        return list(csv.DictReader(f))


def replay(rows):
    """Live blocks at the end, by address; fails on a free of no live block or of another size."""
    live, last = {}, -1
    for r in rows:
        t = int(r["time_us"])
        assert t >= last, r
        last = t
        a, size = int(r["addr"]), int(r["size"])
        if r["action"] == "alloc":
            assert a not in live, r
            live[a] = (size, r["stream"])
        else:
            assert r["action"] == "free_requested", r
            assert live.pop(a)[0] == size, r
    return live


class Shapes(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def test_giant_keeps_two_large_blocks_and_swaps_one_every_ten_steps(self):
        # 2 large blocks, 50 steps of 12 allocs and 12 frees, and at steps 9, 19, ..., 49 one large block freed
        # and another made: 2 + 50 x 24 + 5 x 2 = 1,212 rows; at the end the two last large blocks live.
        rows = write("giant", 1, self.dir.name)
        self.assertEqual(len(rows), 1212)
        live = replay(rows)
        self.assertEqual(len(live), 2)
        self.assertTrue(all(8 << 30 <= size <= 20 << 30 for size, _ in live.values()))
        big = [r for r in rows if r["action"] == "alloc" and int(r["size"]) >= 8 << 30]
        self.assertEqual(len(big), 7)

    def test_growing_frees_everything_each_round(self):
        # 20 rounds of: the first buffer, 60 steps of (a larger buffer, the old one freed, a small block), the
        # last buffer freed and the 60 small blocks: 20 x (1 + 180 + 1 + 60) = 4,840 rows, nothing left live.
        rows = write("growing", 1, self.dir.name)
        self.assertEqual(len(rows), 4840)
        self.assertEqual(replay(rows), {})
        sizes = [int(r["size"]) for r in rows if r["action"] == "alloc" and int(r["size"]) > 100 * 1024]
        self.assertEqual(len(sizes), 20 * 61)
        for first in range(0, len(sizes), 61):  # each step at least 1.08x the last
            steps = sizes[first:first + 61]
            self.assertTrue(all(b >= int(a * 1.08) for a, b in zip(steps, steps[1:])))

    def test_two_stream_frees_the_loaders_batches_on_the_compute_stream(self):
        # 300 batches on stream 7; a batch is freed once four are queued, from the fourth step on: 297, on
        # stream 0; 100 weights and the last three batches stay live.
        rows = write("two_stream", 1, self.dir.name)
        on_loader = {r["addr"] for r in rows if r["action"] == "alloc" and r["stream"] == "7"}
        self.assertEqual(len(on_loader), 300)
        freed = [r for r in rows if r["action"] == "free_requested" and r["addr"] in on_loader]
        self.assertEqual(len(freed), 297)
        self.assertTrue(all(r["stream"] == "0" for r in freed))
        self.assertEqual(len(replay(rows)), 103)

    def test_a_seed_gives_the_same_trace(self):
        one = write("diffusion", 2, self.dir.name)
        self.assertEqual(write("diffusion", 2, self.dir.name), one)
        self.assertEqual(len(replay(one)), 300)  # the 300 weights outlive every image


if __name__ == "__main__":
    unittest.main()
