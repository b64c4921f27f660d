#!/usr/bin/env python3
"""One workload under one allocator in this process; a JSON report of time, memory and failures.

    run_one.py --workload W --allocator A (--steps N | --seconds T) [--seed S] [--limit-bytes B]
               [--warmup K] [--opt key=value ...] [--progress] [--json OUT]

The allocator's PYTORCH_CUDA_ALLOC_CONF must be in the environment before torch is imported (run_all.py
sets it); this script sets it where it is missing and refuses a conflicting one. See README.md.
"""
import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import allocators  # noqa: E402

MAX_MARKS = 20000          # per-step timings are kept for at most this many steps
DEFAULT_WARMUP = {"transformer_train": 3, "cnn_train": 3, "serving": 10}


SLOW_STEP = 1.25           # a step over this times the run's median step counts as slow in step_windows


def step_windows(ms, n=10):
    """The timed steps in order, cut into n runs of consecutive steps (the first ones a step longer where n does
    not divide them), each with its first step, its count, its median step in ms and how many of its steps are
    slow (over SLOW_STEP times the median of the whole run): where a run's slow steps lie in time, bunched in
    a spell of the machine or spread over the run."""
    if not ms:
        return []
    slow = SLOW_STEP * statistics.median(ms)
    n = min(n, len(ms))
    size, extra = divmod(len(ms), n)
    out, first = [], 0
    for k in range(n):
        part = ms[first:first + size + (k < extra)]
        out.append({"first_step": first, "steps": len(part), "median_ms": statistics.median(part),
                    "slow_steps": sum(t > slow for t in part)})
        first += len(part)
    return out


class NvmlSampler(threading.Thread):
    """Reads this process's device memory through NVML every `interval` seconds and keeps the peak.

    The measure is 'process' (usedGpuMemory of the entry with our pid) where NVML lists this process,
    else 'device_minus_baseline' (the device's used bytes minus those read before CUDA started, which
    counts every other process on the device too), else 'unavailable'.
    """

    def __init__(self, interval=0.02):
        super().__init__(daemon=True)
        self.interval, self.pid = interval, os.getpid()
        self.measure, self.peak, self.current, self.samples, self.baseline = "unavailable", 0, 0, 0, None
        self._stop_event = threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(int(first) if first.isdigit() else 0)
            self.baseline = int(pynvml.nvmlDeviceGetMemoryInfo(self.handle).used)
        except Exception as e:  # noqa: BLE001
            self.nvml, self.error = None, f"{type(e).__name__}: {e}"

    def _process_used(self):
        for p in self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
            if p.pid == self.pid and isinstance(p.usedGpuMemory, int):
                return int(p.usedGpuMemory)
        return None

    def choose(self):
        """After CUDA has started: pick the measure, once, for the whole run."""
        if self.nvml is None:
            return
        for _ in range(3):
            try:
                if self._process_used() is not None:
                    self.measure = "process"
                    return
            except Exception:  # noqa: BLE001
                break
            time.sleep(0.05)
        self.measure = "device_minus_baseline"

    def read(self):
        if self.measure == "process":
            return self._process_used()
        if self.measure == "device_minus_baseline":
            return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used) - self.baseline
        return None

    def free_share(self):
        if self.nvml is None:
            return None
        info = self.nvml.nvmlDeviceGetMemoryInfo(self.handle)
        return int(info.free) / int(info.total)

    def sample(self):
        try:
            value = self.read()
        except Exception:  # noqa: BLE001
            return
        if value is not None:
            self.current, self.peak, self.samples = value, max(self.peak, value), self.samples + 1

    def run(self):
        while not self._stop_event.is_set():
            self.sample()
            self._stop_event.wait(self.interval)

    def stop(self):
        self._stop_event.set()
        if self.is_alive():
            self.join(timeout=2)
        self.sample()


def gib(n):
    return "-" if n is None else f"{n / 2**30:.2f}GiB"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", required=True, choices=["transformer_train", "cnn_train", "serving"])
    ap.add_argument("--allocator", required=True, choices=allocators.NAMES)
    ap.add_argument("--steps", type=int, default=None, help="timed steps")
    ap.add_argument("--seconds", type=float, default=None, help="run timed steps until this many seconds pass")
    ap.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: 3; serving 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit-bytes", type=int, default=None, help="the process may use at most this much")
    ap.add_argument("--opt", action="append", default=[], help="workload size, key=value (repeatable)")
    ap.add_argument("--progress", action="store_true", help="a line every 30 s")
    ap.add_argument("--json", default=None, help="write the report here (else print it)")
    args = ap.parse_args()
    if args.steps is None and args.seconds is None:
        ap.error("give --steps or --seconds")
    if args.warmup is None:
        args.warmup = DEFAULT_WARMUP[args.workload]
    return args


def is_oom(e):
    return "out of memory" in str(e).lower()


def main():
    args = parse_args()
    t_process = time.perf_counter()
    conf_note = allocators.check_env(args.allocator)
    sampler = NvmlSampler()                      # its baseline is read before CUDA starts
    report = {
        "workload": args.workload, "allocator": args.allocator, "seed": args.seed, "opts": args.opt,
        "mode": "seconds" if args.seconds else "steps", "steps_asked": args.steps, "seconds_asked": args.seconds,
        "warmup": args.warmup, "limit_bytes": args.limit_bytes,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"), "alloc_conf_note": conf_note,
        "vram_env": allocators.vram_env(),
        "steps": 0, "steps_ok": 0, "wall_s": None, "step_ms_median": None, "step_ms_mean": None,
        "step_ms_p90": None, "step_ms_max": None, "step_ms_count": 0, "slow_steps": None, "step_windows": [],
        "failures": 0, "warmup_failures": 0, "first_failure_s": None, "first_failure_step": None,
        "first_failure_message": None, "free_share_at_first_failure": None, "nvml_used_at_first_failure": None,
        "error": None, "error_s": None,
    }
    progress = {"t0": None, "last": None}
    state = {"timed": False, "steps": 0, "failures": 0}
    rc = 0
    torch = None
    try:
        import torch
        import workloads
        report["torch_version"] = torch.__version__
        report["cuda_version"] = torch.version.cuda
        report.update(allocators.setup(torch, args.allocator, args.limit_bytes))
        report["device_name"] = torch.cuda.get_device_name(0)
        report["device_total_bytes"] = torch.cuda.get_device_properties(0).total_memory
        sampler.choose()
        sampler.start()
        oom_error = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError
        wl = workloads.make(args.workload, seed=args.seed, **workloads.parse_opts(args.opt))
        wl.setup(torch.device("cuda", 0))
        vram_mod = None
        if args.allocator == "vram" and args.limit_bytes:
            import vram as vram_mod          # a pool failure PyTorch did not raise still shows in num_ooms

        def vram_ooms():
            return int(vram_mod.memory_stats(0).get("num_ooms") or 0) if vram_mod else 0

        def failure(step, message, t0):
            if state["timed"]:
                report["failures"] += 1
                if report["first_failure_s"] is None:
                    report["first_failure_s"] = time.perf_counter() - t0
                    report["first_failure_step"] = step
                    report["first_failure_message"] = message[:400]
                    try:
                        report["free_share_at_first_failure"] = sampler.free_share()
                        report["nvml_used_at_first_failure"] = sampler.read()
                    except Exception:  # noqa: BLE001
                        pass
                    if report["free_share_at_first_failure"] is None:
                        try:
                            free, total = torch.cuda.mem_get_info(0)
                            report["free_share_at_first_failure"] = free / total
                        except Exception:  # noqa: BLE001
                            pass
            else:
                report["warmup_failures"] += 1
            wl.recover()
            allocators.empty_cache(torch, args.allocator)

        def one_step(k, t0):
            """Step k; an out-of-memory failure is counted and the step skipped. Returns True on success."""
            before = vram_ooms()
            message = None
            try:
                wl.step(k)
            except oom_error as e:
                message = f"OutOfMemoryError: {e}"
            except RuntimeError as e:
                if not is_oom(e):
                    raise
                message = f"{type(e).__name__}: {e}"
            if message is None and vram_ooms() > before:
                message = "vram num_ooms grew during the step (no exception raised)"
            if message is not None:              # the exception and its frames are gone by now
                failure(k, message, t0)
                return False
            return True

        for k in range(args.warmup):
            one_step(k, None)
        torch.cuda.synchronize()
        report["setup_s"] = time.perf_counter() - t_process

        marks = []
        t0 = time.perf_counter()
        state["timed"] = True
        progress["t0"] = progress["last"] = t0
        i = 0
        while (time.perf_counter() - t0 < args.seconds) if args.seconds else (i < args.steps):
            if len(marks) <= MAX_MARKS:
                ev = torch.cuda.Event(enable_timing=True)
                ev.record()
                marks.append(ev)
            report["steps_ok"] += one_step(args.warmup + i, t0)
            i += 1
            report["steps"] = i
            now = time.perf_counter()
            if args.progress and now - progress["last"] >= 30:
                progress["last"] = now
                print(f"[{args.workload}/{args.allocator}] t={now - t0:.0f}s steps={i} "
                      f"failures={report['failures']} nvml_current={gib(sampler.current)}", flush=True)
        if len(marks) <= MAX_MARKS:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            marks.append(ev)
        torch.cuda.synchronize()
        report["wall_s"] = time.perf_counter() - t0
        if i:
            report["step_ms_mean"] = report["wall_s"] * 1000 / i
        ms = [a.elapsed_time(b) for a, b in zip(marks, marks[1:])]
        if ms:
            report["step_windows"] = step_windows(ms)
            report["slow_steps"] = sum(w["slow_steps"] for w in report["step_windows"])
            ms.sort()
            report.update(step_ms_median=statistics.median(ms), step_ms_p90=ms[int(0.9 * (len(ms) - 1))],
                          step_ms_max=ms[-1], step_ms_count=len(ms))
    except BaseException as e:  # noqa: BLE001  (anything else ends the run; the report still goes out)
        report["error"] = f"{type(e).__name__}: {e}"[:2000]
        if progress["t0"] is not None:
            report["error_s"] = time.perf_counter() - progress["t0"]
        rc = 3
        import traceback
        traceback.print_exc()
    sampler.stop()
    report.update(nvml_peak_bytes=sampler.peak if sampler.samples else None, nvml_measure=sampler.measure,
                  nvml_samples=sampler.samples, nvml_baseline_bytes=sampler.baseline)
    if getattr(sampler, "error", None):
        report["nvml_error"] = sampler.error
    if torch is not None:
        try:
            report.update(allocators.stats(torch, args.allocator))
        except Exception as e:  # noqa: BLE001
            report["stats_error"] = f"{type(e).__name__}: {e}"[:500]
    line = (f"{args.workload}/{args.allocator}: steps={report['steps']} wall_s={report['wall_s']} "
            f"step_ms_median={report['step_ms_median']} nvml_peak={gib(report['nvml_peak_bytes'])} "
            f"({report['nvml_measure']}) failures={report['failures']} error={report['error']}")
    allocators.finish(report, args.json, line, rc, t_process)


if __name__ == "__main__":
    main()
