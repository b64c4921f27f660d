#!/usr/bin/env python3
"""Every workload under every allocator, R times, interleaved; then a summary. See README.md.

    run_all.py --out DIR [--repeats 5] [--budget-s 540] [--workloads ...] [--allocators ...]
               [--steps-per-workload transformer_train=40,cnn_train=30,serving=300]
               [--seconds-per-workload serving=100] [--first-repeat N]

Each run is its own process (run_one.py, then tensor_cost.py once per allocator per repeat), with the
allocator's PYTORCH_CUDA_ALLOC_CONF in its environment. The allocators' order turns by one each repeat.
No run starts once the time budget would be passed; those runs are listed as skipped. DIR/torch-bench.json
is rewritten after every run, so an interrupted benchmark keeps what it measured.

--seconds-per-workload runs those workloads for a time rather than a count of steps (their wall time is then
the time asked; compare step_ms). --first-repeat numbers the repeats from N and turns the order as repeat N
would, so that a benchmark too long for one command can be run as several, one or more repeats each.
`--workloads` followed by no name runs no workload: only tensor_cost.py, in the repeats' orders.
--kernel-time-steps N runs kernel_time.py (the GPU's own time in N steps, from PyTorch's profiler) under each
allocator on each workload after the repeat's runs; --kernel-time-only leaves run_one.py out.
--variant LABEL:VRAM_X=V[,VRAM_Y=W] adds vram with those pool settings in its environment (docs/pool.md) as
an allocator of its own, LABEL, after --allocators in the order; each run's report says its VRAM_* settings.
"""
import argparse
import datetime
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import allocators  # noqa: E402

WORKLOADS = ["transformer_train", "cnn_train", "serving"]
DEFAULT_STEPS = {"transformer_train": 40, "cnn_train": 30, "serving": 300}
FIRST_GUESS_S = {"run_one": 15.0, "tensor_cost": 10.0, "kernel_time": 30.0}   # before one has been seen


def sh(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def git_changed(commit):
    """Tracked files whose content differs from @p commit (git_commit, None where the copy has no git
    metadata): a copy of the tree whose git metadata names another commit than the files it holds says so."""
    if commit is None:
        return None
    out = sh(["git", "-C", str(allocators.REPO), "diff", "--name-only", commit])
    return out.splitlines() if out else []


def git_asked(commit):
    """The commit named in .gpubuild/commit where it is not @p commit: a copy of a tree checked out at one
    commit whose git metadata names another (the tip it was copied with) says which it was asked to be.
    None where the file is missing or empty or names @p commit."""
    try:
        asked = (allocators.REPO / ".gpubuild" / "commit").read_text().strip()
    except OSError:
        return None
    return asked if asked and asked != commit else None


def library_info():
    lib = allocators.default_library()
    if not lib or not Path(lib).exists():
        return {"path": lib, "exists": False}
    data = Path(lib).read_bytes()
    return {"path": lib, "exists": True, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16]}


def run_child(script, alloc, extra, json_path, timeout, env=None):
    """Runs one child (with @p env's variables added to allocator @p alloc's environment); returns its
    record: the child's report, or rc and the end of its output."""
    cmd = [sys.executable, str(HERE / script), "--allocator", alloc, "--json", str(json_path)] + extra
    t0 = time.perf_counter()
    rec = {"cmd": " ".join(cmd[1:]), "rc": None, "elapsed_s": None, "report": None}
    try:
        json_path.unlink(missing_ok=True)
        p = subprocess.run(cmd, env={**allocators.child_env(alloc), **(env or {})}, capture_output=True,
                           text=True, timeout=timeout, cwd=str(HERE))
        rec["rc"], out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rec["rc"], rec["timed_out"] = "timeout", True
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    except Exception as e:  # noqa: BLE001
        rec["rc"], out, err = f"launch failed: {e}", "", ""
    rec["elapsed_s"] = time.perf_counter() - t0
    try:
        rec["report"] = json.loads(json_path.read_text())
    except Exception:  # noqa: BLE001
        pass
    if rec["rc"] != 0 or rec["report"] is None or rec["report"].get("error"):
        rec["stdout_tail"] = out.splitlines()[-10:]
        rec["stderr_tail"] = err.splitlines()[-30:]
    return rec


def ok(rec):
    return rec.get("rc") == 0 and rec.get("report") is not None and not rec["report"].get("error")


def med(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return statistics.median(values) if values else None


def summarize_kernels(records, workloads, allocs):
    """kernel_time.py's figures per workload and allocator: medians over the repeats that count."""
    out = {}
    for w in workloads:
        for a in allocs:
            good = [r["report"] for r in records if r["workload"] == w and r["allocator"] == a and ok(r)]
            if not any(r["workload"] == w and r["allocator"] == a for r in records):
                continue
            out[f"{w}/{a}"] = {"ok": len(good), **{k: med(g.get(k) for g in good) for k in
                                                   ("step_ms", "kernel_ms_per_step", "busy_ms_per_step",
                                                    "span_ms_per_step", "idle_share")}}
    return out


def summarize(runs, costs, workloads, allocs):
    summary, tensor = {}, {}
    for w in workloads:
        native_wall = med(r["report"]["wall_s"] for r in runs
                          if r["workload"] == w and r["allocator"] == "native" and ok(r))
        for a in allocs:
            mine = [r for r in runs if r["workload"] == w and r["allocator"] == a]
            good = [r["report"] for r in mine if ok(r)]
            walls = [g["wall_s"] for g in good if g.get("wall_s") is not None]
            s = {"runs": len(mine), "ok": len(good), "wall_s_median": med(walls),
                 "wall_s_min": min(walls) if walls else None, "wall_s_max": max(walls) if walls else None,
                 "step_ms_median": med(g.get("step_ms_median") for g in good)}
            for key in ("nvml_peak_bytes", "allocator_peak_reserved_bytes", "allocator_peak_allocated_bytes",
                        "driver_calls"):
                s[key + "_median"] = med(g.get(key) for g in good)
            s["nvml_measures"] = sorted({str(g.get("nvml_measure")) for g in good})
            s["failures_total"] = sum(g.get("failures") or 0 for g in good)
            s["wall_vs_native"] = (s["wall_s_median"] / native_wall
                                   if s["wall_s_median"] and native_wall else None)
            summary[f"{w}/{a}"] = s
    for a in allocs:
        good = [c["report"] for c in costs if c["allocator"] == a and ok(c)]
        tensor[a] = {label: med(g["sizes"][label]["median_ns"] for g in good if label in g.get("sizes", {}))
                     for label in ("4KiB", "1MiB", "64MiB")}
        tensor[a]["cpu_4KiB_ns"] = med(g.get("cpu_4KiB_ns") for g in good)
        tensor[a]["ok"] = len(good)
    return summary, tensor


def dash(n, spec):
    """n formatted, or "-" where there is no figure."""
    return "-" if n is None else format(n, spec)


def kernel_table(kernels):
    f = dash
    lines = [f"{'kernel time, per step':28} {'ok':>3} {'step ms':>9} {'kernel ms':>10} {'busy ms':>9} {'idle':>7}"]
    for key, k in kernels.items():
        lines.append(f"{key:28} {k['ok']:>3} {f(k['step_ms'], '.3f'):>9} {f(k['kernel_ms_per_step'], '.3f'):>10} "
                     f"{f(k['busy_ms_per_step'], '.3f'):>9} {f(k['idle_share'], '.1%'):>7}")
    return "\n".join(lines)


def table(summary, tensor):
    def g(n):
        return "-" if n is None else f"{n / 2**30:7.2f}"

    f = dash
    lines = [f"{'workload/allocator':28} {'ok':>5} {'wall_s med [min-max]':>22} {'x native':>8} {'step_ms':>8} "
             f"{'nvml GiB':>8} {'resv GiB':>8} {'alloc GiB':>9} {'drv calls':>9} {'fails':>5}"]
    for key, s in summary.items():
        wall = (f"{s['wall_s_median']:.2f} [{s['wall_s_min']:.2f}-{s['wall_s_max']:.2f}]"
                if s["wall_s_median"] is not None else "-")
        lines.append(f"{key:28} {s['ok']:>2}/{s['runs']:<2} {wall:>22} {f(s['wall_vs_native'], '.3f'):>8} "
                     f"{f(s['step_ms_median'], '.2f'):>8} {g(s['nvml_peak_bytes_median']):>8} "
                     f"{g(s['allocator_peak_reserved_bytes_median']):>8} "
                     f"{g(s['allocator_peak_allocated_bytes_median']):>9} "
                     f"{f(s['driver_calls_median'], '.0f'):>9} {s['failures_total']:>5}")
    lines.append("")
    lines.append(f"{'tensor empty+del, ns':20} " + " ".join(f"{k:>10}" for k in ("4KiB", "1MiB", "64MiB", "cpu 4KiB")))
    for a, t in tensor.items():
        lines.append(f"{a:20} " + " ".join(f"{f(t.get(k), '.0f'):>10}"
                                          for k in ("4KiB", "1MiB", "64MiB", "cpu_4KiB_ns")))
    return "\n".join(lines)


def parse_variant(spec, taken):
    """LABEL:VRAM_X=V[,VRAM_Y=W] -> (LABEL, {VRAM_X: V, ...}); ValueError with the reason."""
    label, colon, rest = spec.partition(":")
    label = label.strip()
    if not colon or not label or any(c in label for c in "/ =,"):
        raise ValueError(f"'{spec}' is not LABEL:VRAM_NAME=VALUE[,VRAM_NAME=VALUE...]")
    if label in taken:
        raise ValueError(f"'{label}' names an allocator already")
    env = {}
    for item in rest.split(","):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key.startswith("VRAM_") or key == "VRAM_LIBRARY" or not value.strip():
            raise ValueError(f"'{spec}': '{item}' is not VRAM_NAME=VALUE (a pool setting, docs/pool.md)")
        env[key] = value.strip()
    return label, env


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for torch-bench.json")
    ap.add_argument("--work-dir", default=None, help="folder for the children's own reports (default: a temp dir)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--workloads", nargs="*", default=WORKLOADS, choices=WORKLOADS,
                    help="the workloads (default: all); given with none, only the per-tensor cost runs")
    ap.add_argument("--allocators", nargs="+", default=list(allocators.NAMES), choices=allocators.NAMES)
    ap.add_argument("--steps-per-workload", default="", help="e.g. transformer_train=40,cnn_train=30,serving=300")
    ap.add_argument("--seconds-per-workload", default="",
                    help="e.g. serving=100: run these workloads for so many seconds instead of a count of steps")
    ap.add_argument("--first-repeat", type=int, default=1, help="the number of the first repeat (default 1)")
    ap.add_argument("--tensor-cost-repeats", type=int, default=None,
                    help="run tensor_cost.py in this many of the repeats (default: all; 0: never)")
    ap.add_argument("--run-timeout-s", type=float, default=90)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opt", action="append", default=[],
                    help="workload:key=value, passed to that workload's runs (repeatable)")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:VRAM_X=V[,...]",
                    help="vram with these pool settings, compared as allocator LABEL (repeatable)")
    ap.add_argument("--kernel-time-steps", type=int, default=0,
                    help="kernel_time.py for this many steps under each allocator after each repeat's runs (0: never)")
    ap.add_argument("--kernel-time-only", action="store_true", help="no run_one.py runs, only kernel_time.py")
    args = ap.parse_args()
    if args.kernel_time_steps < 0 or (args.kernel_time_only and args.kernel_time_steps == 0):
        ap.error("--kernel-time-steps: a count of steps, 1 or more with --kernel-time-only")
    variants = {}
    for spec in args.variant:
        try:
            label, env = parse_variant(spec, set(allocators.NAMES) | set(variants))
        except ValueError as e:
            ap.error(f"--variant: {e}")
        variants[label] = env
    args.allocators = list(dict.fromkeys(args.allocators)) + list(variants)

    steps = dict(DEFAULT_STEPS)
    for item in filter(None, args.steps_per_workload.split(",")):
        key, _, value = item.partition("=")
        steps[key.strip()] = int(value)
    seconds = {}
    for item in filter(None, args.seconds_per_workload.split(",")):
        key, _, value = item.partition("=")
        try:
            secs = float(value)
        except ValueError:
            secs = 0.0
        if key.strip() not in WORKLOADS or not secs > 0:
            ap.error(f"--seconds-per-workload: '{item}' is not WORKLOAD=SECONDS")
        seconds[key.strip()] = secs
    if args.first_repeat < 1:
        ap.error("--first-repeat: 1 or more")
    tc_repeats = args.repeats if args.tensor_cost_repeats is None else args.tensor_cost_repeats
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="torch-bench-"))
    work.mkdir(parents=True, exist_ok=True)

    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    commit = sh(["git", "-C", str(allocators.REPO), "rev-parse", "HEAD"])
    doc = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "gpu": gpu, "torch_version": None, "cuda_version": None, "python": sys.version.split()[0],
           "git_commit": commit,
           "git_changed": git_changed(commit),
           "git_asked": git_asked(commit),
           "libvram": library_info(),
           "settings": {"repeats": args.repeats, "budget_s": args.budget_s, "workloads": args.workloads,
                        "allocators": args.allocators, "steps": {w: steps[w] for w in args.workloads if w not in seconds},
                        "seconds": {w: seconds[w] for w in args.workloads if w in seconds},
                        "first_repeat": args.first_repeat,
                        "tensor_cost_repeats": tc_repeats, "seed": args.seed, "opts": args.opt,
                        "variants": variants, "run_timeout_s": args.run_timeout_s,
                        "kernel_time_steps": args.kernel_time_steps, "kernel_time_only": args.kernel_time_only},
           "runs": [], "tensor_cost": [], "skipped": [], "summary": {}, "tensor_cost_summary": {}}
    if args.kernel_time_steps:
        doc["kernel_time"], doc["kernel_time_summary"] = [], {}
    print(f"gpu: {gpu}; {args.repeats} repeats x {len(args.workloads)} workloads x {len(args.allocators)} "
          f"allocators; budget {args.budget_s:.0f} s; children's files in {work}", flush=True)

    start = time.perf_counter()
    longest = {}   # (script, workload) -> the longest run seen, the guess for the next one

    def launch(r, script, key, alloc, extra, json_name):
        elapsed = time.perf_counter() - start
        own = seconds.get(key[1], 0.0) if script == "run_one" else 0.0   # the run's own seconds
        guess = longest.get(key, FIRST_GUESS_S[script] + own)
        entry = {"repeat": r, "script": script, "workload": key[1], "allocator": alloc}
        if elapsed + guess > args.budget_s:
            doc["skipped"].append({**entry, "reason": f"budget: {elapsed:.0f} s gone, a run takes ~{guess:.0f} s"})
            print(f"[r{r} {key[1]}/{alloc}] skipped (budget)", flush=True)
            return None
        run_timeout = args.run_timeout_s + own
        timeout = max(10.0, min(run_timeout, args.budget_s + 30 - elapsed))
        base = "vram" if alloc in variants else alloc
        rec = {**entry, **run_child(script + ".py", base, extra, work / json_name, timeout, variants.get(alloc))}
        if alloc in variants:
            rec["variant_of"], rec["variant_env"] = base, variants[alloc]
        longest[key] = max(longest.get(key, 0.0), rec["elapsed_s"])
        rep = rec["report"] or {}
        if doc["torch_version"] is None and rep.get("torch_version"):
            doc["torch_version"], doc["cuda_version"] = rep.get("torch_version"), rep.get("cuda_version")
        status = "ok" if ok(rec) else f"FAILED rc={rec['rc']} {rep.get('error') or ''}".strip()
        print(f"[r{r} {key[1]}/{alloc}] {status} in {rec['elapsed_s']:.1f} s  wall_s={rep.get('wall_s')} "
              f"step_ms={rep.get('step_ms_median')} nvml_peak={rep.get('nvml_peak_bytes')} "
              f"failures={rep.get('failures')}", flush=True)
        if not ok(rec):
            for line in rec.get("stderr_tail", [])[-5:]:
                print(f"    {line}", flush=True)
        return rec

    def save():
        doc["summary"], doc["tensor_cost_summary"] = summarize(doc["runs"], doc["tensor_cost"],
                                                               args.workloads, args.allocators)
        if args.kernel_time_steps:
            doc["kernel_time_summary"] = summarize_kernels(doc["kernel_time"], args.workloads, args.allocators)
        doc["elapsed_s"] = time.perf_counter() - start
        tmp = out / "torch-bench.json.tmp"
        tmp.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        tmp.replace(out / "torch-bench.json")

    last = args.first_repeat + args.repeats - 1
    for r in range(args.first_repeat, last + 1):
        k = (r - 1) % len(args.allocators)
        order = args.allocators[k:] + args.allocators[:k]
        for w in args.workloads:
            opts = [x for o in args.opt if o.startswith(w + ":") for x in ("--opt", o.split(":", 1)[1])]
            for a in ([] if args.kernel_time_only else order):
                length = ["--seconds", str(seconds[w])] if w in seconds else ["--steps", str(steps[w])]
                extra = ["--workload", w] + length + ["--seed", str(args.seed)] + opts
                rec = launch(r, "run_one", ("run_one", w), a, extra, f"r{r}-{w}-{a}.json")
                if rec is not None:
                    doc["runs"].append(rec)
                    save()
            for a in (order if args.kernel_time_steps else []):
                extra = ["--workload", w, "--steps", str(args.kernel_time_steps), "--seed", str(args.seed)] + opts
                rec = launch(r, "kernel_time", ("kernel_time", w), a, extra, f"r{r}-kernels-{w}-{a}.json")
                if rec is not None:
                    doc["kernel_time"].append(rec)
                    save()
        if r - args.first_repeat < tc_repeats:
            for a in order:
                rec = launch(r, "tensor_cost", ("tensor_cost", "tensor_cost"), a, [], f"r{r}-tensor-{a}.json")
                if rec is not None:
                    doc["tensor_cost"].append(rec)
                    save()
    save()
    print()
    print(table(doc["summary"], doc["tensor_cost_summary"]))
    if args.kernel_time_steps:
        print()
        print(kernel_table(doc["kernel_time_summary"]))
    print(f"\n{len(doc['runs'])} runs, {len(doc['tensor_cost'])} tensor-cost runs, {len(doc['skipped'])} skipped; "
          f"{doc['elapsed_s']:.0f} s; written to {out / 'torch-bench.json'}", flush=True)


if __name__ == "__main__":
    main()
