#!/usr/bin/env python3
"""The GPU's own time in a workload's steps under one allocator: whether an allocator makes the kernels
slower (where the data lies) or leaves the GPU waiting (the host's time), which a step time alone cannot tell.

    kernel_time.py --workload W --allocator A [--steps 30] [--warmup K] [--seed S] [--opt key=value ...]
                   [--json OUT]

After the warm-up, `steps` steps are timed with CUDA events (the step time, no profiler), then the same number
again under PyTorch's profiler, which records every kernel, copy and fill on the GPU (CUPTI). From those:
  kernel_ms_per_step  the sum of their durations, per step: the GPU's work, whoever allocated its memory;
  busy_ms_per_step    the time at least one of them ran (overlaps counted once), per step;
  span_ms_per_step    from the first one's start to the last one's end, per step;
  idle_share          1 - busy / span: the share of the profiled steps the GPU spent waiting;
  top_kernels         the 40 names with the most time: count and total microseconds.
The profiler slows the host down, so idle_share is an upper bound for the unprofiled steps (step_ms less
busy_ms_per_step is the wait of an unprofiled step: merge.py's wait_ms_per_step); kernel_ms_per_step is what
to compare between allocators. The allocator's PYTORCH_CUDA_ALLOC_CONF is set as run_one.py sets it.
"""
import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import allocators  # noqa: E402

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
DEFAULT_WARMUP = {"transformer_train": 3, "cnn_train": 3, "serving": 10}
TOP = 40


def gpu_time(trace_events, steps):
    """The GPU activity of a profiler trace (Chrome trace events, microseconds), summed up per step."""
    spans = []
    by_name = {}
    for e in trace_events:
        if not isinstance(e, dict) or str(e.get("cat", "")).lower() not in GPU_CATEGORIES or e.get("ph") != "X":
            continue
        try:
            start, dur = float(e["ts"]), float(e["dur"])
        except (KeyError, TypeError, ValueError):
            continue
        spans.append((start, start + dur))
        name = str(e.get("name", "?"))
        count, total = by_name.get(name, (0, 0.0))
        by_name[name] = (count + 1, total + dur)
    out = {"gpu_events": len(spans), "kernel_ms_per_step": None, "busy_ms_per_step": None,
           "span_ms_per_step": None, "idle_share": None, "top_kernels": []}
    if not spans or steps < 1:
        return out
    spans.sort()
    busy, (cur_start, cur_end) = 0.0, spans[0]
    for s, e in spans[1:]:
        if s > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    busy += cur_end - cur_start
    span = max(e for _, e in spans) - spans[0][0]
    out.update(kernel_ms_per_step=sum(e - s for s, e in spans) / steps / 1000.0,
               busy_ms_per_step=busy / steps / 1000.0, span_ms_per_step=span / steps / 1000.0,
               idle_share=1.0 - busy / span if span > 0 else 0.0)
    top = sorted(by_name.items(), key=lambda kv: (-kv[1][1], kv[0]))[:TOP]
    out["top_kernels"] = [{"name": n, "count": c, "total_us": t} for n, (c, t) in top]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True, choices=sorted(DEFAULT_WARMUP))
    ap.add_argument("--allocator", required=True, choices=allocators.NAMES)
    ap.add_argument("--steps", type=int, default=30, help="steps timed, then as many profiled (default 30)")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: 3; serving 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opt", action="append", default=[], help="workload size, key=value (repeatable)")
    ap.add_argument("--json", default=None, help="write the report here (else print it)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps: 1 or more")
    warmup = DEFAULT_WARMUP[args.workload] if args.warmup is None else args.warmup
    t_process = time.perf_counter()
    report = {"workload": args.workload, "allocator": args.allocator, "seed": args.seed, "opts": args.opt,
              "alloc_conf_note": allocators.check_env(args.allocator), "vram_env": allocators.vram_env(),
              "steps": args.steps, "warmup": warmup, "step_ms": None, "error": None}
    rc = 0
    try:
        import torch
        import workloads
        from torch.profiler import ProfilerActivity, profile
        report["torch_version"] = torch.__version__
        report.update(allocators.setup(torch, args.allocator))
        report["device_name"] = torch.cuda.get_device_name(0)
        wl = workloads.make(args.workload, seed=args.seed, **workloads.parse_opts(args.opt))
        wl.setup(torch.device("cuda", 0))
        for k in range(warmup):
            wl.step(k)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for k in range(warmup, warmup + args.steps):
            wl.step(k)
        end.record()
        torch.cuda.synchronize()
        report["step_ms"] = start.elapsed_time(end) / args.steps
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for k in range(warmup + args.steps, warmup + 2 * args.steps):
                wl.step(k)
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            events = json.loads(path.read_text()).get("traceEvents", [])
        report.update(gpu_time(events, args.steps))
        if not report["gpu_events"]:
            raise RuntimeError("the profiler recorded no GPU activity (is CUPTI missing from this PyTorch?)")
    except BaseException as e:  # noqa: BLE001  (the report still goes out)
        report["error"] = f"{type(e).__name__}: {e}"[:2000]
        rc = 3
        import traceback
        traceback.print_exc()
    line = (f"{args.workload}/{args.allocator}: step_ms={report['step_ms']} "
            f"kernel_ms_per_step={report.get('kernel_ms_per_step')} idle_share={report.get('idle_share')} "
            f"error={report['error']}")
    allocators.finish(report, args.json, line, rc, t_process)


if __name__ == "__main__":
    main()
