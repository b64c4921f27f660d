#!/usr/bin/env python3
"""The cost of one CUDA tensor: torch.empty(n, dtype=torch.uint8, device='cuda') then del, in ns.

    tensor_cost.py --allocator A [--repeats 5] [--json OUT]

For each size (4 KiB, 1 MiB, 64 MiB): a warm-up, then `repeats` timed loops of `iters` pairs
(time.perf_counter_ns around the loop); the figure is the median of the loops' ns per pair. The same
loop with a 4 KiB CPU tensor is the floor that PyTorch's own dispatch costs, whatever the allocator.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import allocators  # noqa: E402

SIZES = [("4KiB", 4 << 10, 20000), ("1MiB", 1 << 20, 20000), ("64MiB", 64 << 20, 2000)]


def loop_ns(torch, n, iters, device):
    empty, u8 = torch.empty, torch.uint8
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        t = empty(n, dtype=u8, device=device)
        del t
    return (time.perf_counter_ns() - t0) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--allocator", required=True, choices=allocators.NAMES)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t_process = time.perf_counter()
    report = {"allocator": args.allocator, "alloc_conf_note": allocators.check_env(args.allocator),
              "vram_env": allocators.vram_env(), "repeats": args.repeats, "sizes": {}, "error": None}
    rc = 0
    try:
        import torch
        report["torch_version"] = torch.__version__
        report.update(allocators.setup(torch, args.allocator))
        device = torch.device("cuda", 0)
        torch.empty(1, device=device)
        torch.cuda.synchronize()
        loop_ns(torch, 4 << 10, 1000, "cpu")
        report["cpu_4KiB_ns"] = statistics.median(loop_ns(torch, 4 << 10, 20000, "cpu") for _ in range(3))
        for label, n, iters in SIZES:
            loop_ns(torch, n, max(100, iters // 10), device)
            torch.cuda.synchronize()
            runs = [loop_ns(torch, n, iters, device) for _ in range(args.repeats)]
            torch.cuda.synchronize()
            report["sizes"][label] = {"bytes": n, "iters": iters, "ns_per_pair": runs,
                                      "median_ns": statistics.median(runs)}
    except BaseException as e:  # noqa: BLE001
        report["error"] = f"{type(e).__name__}: {e}"[:2000]
        rc = 3
        import traceback
        traceback.print_exc()
    line = (f"{args.allocator} {({k: round(v['median_ns']) for k, v in report['sizes'].items()})} "
            f"{report['error']}")
    allocators.finish(report, args.json, line, rc, t_process, close_recording=False)


if __name__ == "__main__":
    main()
