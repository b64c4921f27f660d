#!/usr/bin/env python3
"""The repeats of several run_all.py commands as one benchmark: a table and, with --json, a file.

    merge.py FILE_OR_DIR... [--json OUT] [--allow-commits]

A benchmark of runs of minutes is too long for one command (or one machine's loan), so it is run as several,
one repeat or one workload each (`run_all.py --first-repeat N`). This reads their torch-bench.json files (a
folder stands for every torch-bench*.json in it) and summarizes each workload and allocator over every
repeat found: the median and range of what was measured, and, against PyTorch's allocators, whether vram's
device peak is at or below every other's and its time within native's spread; each variant of vram
(run_all.py --variant) against vram and native; the per-tensor cost of each allocator (tensor_cost.py's
median at each size) over every run of it; and the GPU's own time per step (kernel_time.py, run_all.py
--kernel-time-steps) over every round of it, with vram's and each variant's against native's.

It refuses, with the reason, files whose runs cannot be put side by side: from different GPU models, of a
workload run for another time or count of steps, with other model sizes (--opt) or seed, of the same repeat
twice, of one allocator made with different VRAM_* settings, or built from different commits (pass
--allow-commits where those commits share the pool's code; the commits and the libraries' hashes are listed in
the output). A run that failed is listed with its repeat
marked x and counts in no figure.

A folder's tensor-cost.json is read too: the per-tensor cost runs of 2026-12-06 were made by a loop of
tensor_cost.py outside run_all.py, which wrote {"runs": [{"repeat", "allocator", "report"}]} with the GPU and
the commit in device.txt beside it (`gpu-session tensor-cost N [F]` now writes run_all.py's
torch-bench-tensor-cost-rF.json instead).
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from allocators import NAMES as ALLOCATORS  # noqa: E402  (run_all.py's order, for the table)
from run_all import ok as counts  # noqa: E402  (whether a run's figures count: rc 0, a report, no error)

COST_SIZES = ("4KiB", "1MiB", "64MiB")                   # tensor_cost.py's sizes
MEASURES = ("steps", "wall_s", "step_ms_median", "nvml_peak_bytes", "allocator_peak_reserved_bytes",
            "allocator_peak_allocated_bytes", "driver_calls")
KERNEL_MEASURES = ("step_ms", "kernel_ms_per_step", "busy_ms_per_step", "idle_share")   # kernel_time.py's


class MergeError(Exception):
    pass


def files_of(paths):
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(p.glob("torch-bench*.json")) + sorted(p.glob("tensor-cost.json"))
            if not found:
                raise MergeError(f"{p}: no torch-bench*.json or tensor-cost.json in this folder")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise MergeError(f"{p}: no such file or folder")
    return out


def load(path):
    """A torch-bench.json, its shape checked so that what follows can rely on it."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise MergeError(f"{path}: not a torch-bench.json ({e})") from None
    if isinstance(doc, dict) and "workloads" in doc and "runs" not in doc:
        raise MergeError(f"{path}: a summary merge.py wrote, not a torch-bench.json of run_all.py")
    if isinstance(doc, dict) and "settings" not in doc and path.name == "tensor-cost.json":
        doc = older_tensor_cost(path, doc)
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not isinstance(doc.get("settings"), dict):
        raise MergeError(f"{path}: not a torch-bench.json (no 'runs' and 'settings')")
    settings = doc["settings"]
    for key in ("seconds", "steps"):
        table = settings.get(key) or {}
        if not isinstance(table, dict) or not all(number(v) and v > 0 for v in table.values()):
            raise MergeError(f"{path}: settings.{key} is not a table of positive numbers")
    costs = doc.get("tensor_cost") or []
    kernels = doc.get("kernel_time") or []
    for what, entries in (("tensor_cost", costs), ("kernel_time", kernels)):
        if not isinstance(entries, list):
            raise MergeError(f"{path}: its {what} is not a list")
    if kernels and not (isinstance(settings.get("kernel_time_steps"), int) and settings["kernel_time_steps"] > 0):
        raise MergeError(f"{path}: it has kernel_time runs but no positive settings.kernel_time_steps")
    for what, entries in (("runs", doc["runs"]), ("tensor_cost", costs), ("kernel_time", kernels)):
        for i, run in enumerate(entries):
            if not (isinstance(run, dict) and isinstance(run.get("allocator"), str) and number(run.get("repeat"))
                    and (what == "tensor_cost" or isinstance(run.get("workload"), str))):
                raise MergeError(f"{path}: entry {i} of its {what} names no allocator, repeat or workload")
            if run.get("report") is not None and not isinstance(run["report"], dict):
                raise MergeError(f"{path}: entry {i} of its {what} has a report that is not an object")
    return doc


def older_tensor_cost(path, doc):
    """A tensor-cost.json of the older loop (see the top) in run_all.py's shape: its runs as the per-tensor
    cost runs (rc 0: the loop kept each run's report, which names any error), the GPU model and the commit
    from the device.txt beside it."""
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise MergeError(f"{path}: not a tensor-cost.json (no 'runs')")
    try:
        lines = (path.parent / "device.txt").read_text().splitlines()
    except OSError as e:
        raise MergeError(f"{path}: no device.txt beside it for the GPU and the commit ({e.strerror})") from None
    gpus = [ln.strip() for ln in lines if ln.startswith("NVIDIA ")]
    commits = [ln.strip() for ln in lines if re.fullmatch(r"[0-9a-f]{40}", ln.strip())]
    if len(gpus) != 1 or len(commits) != 1:
        raise MergeError(f"{path}: its device.txt names {len(gpus)} GPUs and {len(commits)} commits, not one each")
    costs = [{**run, "rc": 0} if isinstance(run, dict) else run for run in runs]
    return {"gpu": gpus[0], "git_commit": commits[0], "settings": {}, "runs": [], "tensor_cost": costs}


def size_median(report, label):
    sizes = report.get("sizes")
    entry = sizes.get(label) if isinstance(sizes, dict) else None
    return entry.get("median_ns") if isinstance(entry, dict) else None


def number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def gpu_model(doc):
    return (doc.get("gpu") or "unknown").split(",")[0].strip()


def length_of(doc, workload):
    """How long a workload ran in this command: ('seconds', s) or ('steps', n)."""
    s = doc["settings"]
    if workload in (s.get("seconds") or {}):
        return ("seconds", float(s["seconds"][workload]))
    return ("steps", int((s.get("steps") or {}).get(workload, 0)))


def rank(allocator):
    """run_all.py's order of the allocators, others after them by name."""
    return (ALLOCATORS.index(allocator) if allocator in ALLOCATORS else len(ALLOCATORS), allocator)


def counted(runs):
    """The reports of the runs that count, and a cell with the repeats, those that count, and their number."""
    good = [r["report"] for r in runs if counts(r)]
    return good, {"repeats": sorted(r["repeat"] for r in runs),
                  "repeats_ok": sorted(r["repeat"] for r in runs if counts(r)), "ok": len(good)}


def summary(values):
    values = [v for v in values if number(v)]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def settings_of(run):
    """The VRAM_* settings a run ran with: its report's vram_env, else run_all.py's variant_env; None where
    the file does not say (files from before either was recorded)."""
    env = (run.get("report") or {}).get("vram_env") if isinstance(run.get("report"), dict) else None
    if isinstance(env, dict):
        return env
    return run.get("variant_env") if isinstance(run.get("variant_env"), dict) else None


def check_settings(docs):
    """Refuses runs of one allocator label made with different VRAM_* settings (a variant's label reused for
    another variant, or a stray variable in one command's environment)."""
    first = {}
    for name, doc in docs:
        for run in list(doc["runs"]) + list(doc.get("tensor_cost") or []) + list(doc.get("kernel_time") or []):
            env = settings_of(run)
            if env is None:
                continue
            a = run.get("allocator")
            if a not in first:
                first[a] = (env, name)
            elif env != first[a][0]:
                raise MergeError(f"{name}: {a} ran with VRAM settings {env or 'none'}, in {first[a][1]} with "
                                 f"{first[a][0] or 'none'}")


def merge(docs, allow_commits=False):
    """docs: [(name, doc)]. Returns the merged summary as a dict; raises MergeError."""
    models = sorted({gpu_model(d) for _, d in docs})
    if len(models) > 1:
        raise MergeError("runs from different GPU models cannot be put side by side: " + ", ".join(models) +
                         " (merge each model's files on their own)")
    # A run's commit is the one it was asked for where its copy's git metadata named another (git_asked).
    commits = sorted({d.get("git_asked") or d.get("git_commit") or "unknown" for _, d in docs})
    if len(commits) > 1 and not allow_commits:
        raise MergeError("runs built from different commits: " + ", ".join(c[:12] for c in commits) +
                         " (--allow-commits where they share the pool's code)")
    # Model sizes (--opt) and the seed change what is measured: runs made with others are another benchmark.
    first_shape = None
    for name, doc in docs:
        opts = doc["settings"].get("opts") or []
        shape = (sorted(map(str, opts if isinstance(opts, list) else [opts])), doc["settings"].get("seed", 0))
        if first_shape is None:
            first_shape = (shape, name)
        elif shape != first_shape[0]:
            raise MergeError(f"{name}: run with --opt {shape[0]} and --seed {shape[1]}, {first_shape[1]} with "
                             f"--opt {first_shape[0][0]} and --seed {first_shape[0][1]}")
    libraries = sorted({str((d.get("libvram") or {}).get("sha256") or "not recorded") for _, d in docs})
    check_settings(docs)
    cells, lengths, seen = {}, {}, {}
    for name, doc in docs:
        for run in doc["runs"]:
            w, a, r = run.get("workload"), run.get("allocator"), run.get("repeat")
            length = length_of(doc, w)
            if lengths.setdefault(w, length) != length:
                raise MergeError(f"{name}: {w} ran for {length[1]:g} {length[0]} here, "
                                 f"{lengths[w][1]:g} {lengths[w][0]} elsewhere")
            key = (w, a, r)
            if key in seen:
                raise MergeError(f"{name}: repeat {r} of {w} under {a} is also in {seen[key]}")
            seen[key] = name
            cells.setdefault((w, a), []).append(run)
    out = {"gpu_model": models[0] if models else None, "commits": commits, "libraries": libraries,
           "files": [name for name, _ in docs], "workloads": {}}
    costs, seen_costs = {}, {}
    for name, doc in docs:
        for run in doc.get("tensor_cost") or []:
            a, r = run.get("allocator"), run.get("repeat")
            if (a, r) in seen_costs:
                raise MergeError(f"{name}: repeat {r} of the per-tensor cost under {a} is also in {seen_costs[(a, r)]}")
            seen_costs[(a, r)] = name
            costs.setdefault(a, []).append(run)
    for (w, a), runs in sorted(cells.items(), key=lambda item: (item[0][0], rank(item[0][1]))):
        good, cell = counted(runs)
        cell["failures"] = sum(g["failures"] for g in good if number(g.get("failures")))
        for m in MEASURES:
            cell[m] = summary(g.get(m) for g in good)
        out["workloads"].setdefault(w, {"length": list(lengths[w]), "allocators": {}})["allocators"][a] = cell
    for w, entry in out["workloads"].items():
        entry["vram"] = verdict(entry["allocators"], entry["length"][0])
        entry["variants"] = variant_verdicts(entry["allocators"], entry["length"][0])
    # The per-tensor cost: each run's median at each size, summed up over the runs.
    out["tensor_cost"] = {}
    for a in sorted(costs, key=rank):
        good, cell = counted(costs[a])
        for label in COST_SIZES:
            cell[label] = summary(size_median(g, label) for g in good)
        cell["cpu_4KiB_ns"] = summary(g.get("cpu_4KiB_ns") for g in good)
        out["tensor_cost"][a] = cell
    out["kernel_time"] = merge_kernels(docs)
    return out


def merge_kernels(docs):
    """kernel_time.py's runs: per workload (profiled for the same number of steps in every file) and allocator,
    each measure over the rounds that count; and each allocator's medians against native's."""
    cells, steps, seen = {}, {}, {}
    for name, doc in docs:
        for run in doc.get("kernel_time") or []:
            w, a, r = run["workload"], run["allocator"], run["repeat"]
            n = doc["settings"]["kernel_time_steps"]
            if steps.setdefault(w, (n, name))[0] != n:
                raise MergeError(f"{name}: the GPU's time in {w} was taken over {n} steps here, "
                                 f"{steps[w][0]} in {steps[w][1]}")
            if (w, a, r) in seen:
                raise MergeError(f"{name}: round {r} of the GPU's time in {w} under {a} is also in {seen[(w, a, r)]}")
            seen[(w, a, r)] = name
            cells.setdefault(w, {}).setdefault(a, []).append(run)
    out = {}
    for w in sorted(cells):
        entry = {"steps": steps[w][0], "allocators": {}, "vs_native": {}}
        for a in sorted(cells[w], key=rank):
            good, cell = counted(cells[w][a])
            for m in KERNEL_MEASURES:
                cell[m] = summary(g.get(m) for g in good)
            # The GPU's wait in an unprofiled step: the step (CUDA events, no profiler) less the time the GPU ran
            # something. idle_share is taken under the profiler, which slows the host and so lengthens the wait.
            cell["wait_ms_per_step"] = summary(g["step_ms"] - g["busy_ms_per_step"] for g in good
                                               if number(g.get("step_ms")) and number(g.get("busy_ms_per_step")))
            entry["allocators"][a] = cell
        native = entry["allocators"].get("native")
        for a, cell in entry["allocators"].items():
            if a == "native" or not native:
                continue
            entry["vs_native"][a] = {m: cell[m]["median"] / native[m]["median"]
                                     if cell[m] and native[m] and native[m]["median"] else None
                                     for m in ("step_ms", "kernel_ms_per_step", "busy_ms_per_step")}
        out[w] = entry
    return out


def verdict(cells, mode):
    """vram against PyTorch's allocators (not vram's variants): device peak (medians) and time against native's
    range."""
    vram, native = cells.get("vram"), cells.get("native")
    if not vram or not vram["nvml_peak_bytes"]:
        return None
    others = {a: c["nvml_peak_bytes"]["median"] for a, c in cells.items()
              if a in ALLOCATORS and a != "vram" and c["nvml_peak_bytes"]}
    v = {"nvml_peak_median": vram["nvml_peak_bytes"]["median"]}
    if others:
        lowest = min(others, key=others.get)
        v["lowest_other"] = lowest
        v["nvml_peak_minus_lowest_other"] = v["nvml_peak_median"] - others[lowest]
        v["nvml_peak_at_or_below_every_other"] = v["nvml_peak_median"] <= others[lowest]
    # Timed runs compare the steps done in the time (more is faster); counted runs the wall time.
    measure = "steps" if mode == "seconds" else "wall_s"
    if native and native[measure] and vram[measure]:
        n, m = native[measure], vram[measure]["median"]
        v["time_measure"] = measure
        v["vs_native"] = m / n["median"] if n["median"] else None
        # One run of native has no spread to be within.
        v["within_native_range"] = n["min"] <= m <= n["max"] if n["n"] >= 2 else None
        v["at_least_as_fast_as_native"] = m >= n["median"] if measure == "steps" else m <= n["median"]
        # Where the time budget skipped runs, the two medians are over different repeats: say so.
        v["same_repeats_as_native"] = vram["repeats_ok"] == native["repeats_ok"]
    return v


def variant_verdicts(cells, mode):
    """Each allocator outside run_all.py's four (vram with other settings, run_all.py --variant): its time
    measure's median against vram's and native's."""
    measure = "steps" if mode == "seconds" else "wall_s"
    out = {}
    for a, c in cells.items():
        if a in ALLOCATORS or not c[measure]:
            continue
        m = c[measure]["median"]
        out[a] = {"time_measure": measure,
                  **{f"vs_{b}": m / cells[b][measure]["median"] if b in cells and cells[b][measure] and
                     cells[b][measure]["median"] else None for b in ("vram", "native")}}
    return out


def fmt_range(s, scale=1.0, spec=",.0f"):
    if s is None:
        return "-"
    if s["n"] == 1:
        return format(s["median"] / scale, spec)
    return f"{format(s['median'] / scale, spec)} [{format(s['min'] / scale, spec)}-{format(s['max'] / scale, spec)}]"


def repeats_text(cell):
    """The repeats, those whose run does not count marked with an x."""
    return ",".join(f"{r}" if r in cell["repeats_ok"] else f"{r}x" for r in cell["repeats"])


def table(merged):
    lines = [f"gpu: {merged['gpu_model']}; commits: {', '.join(c[:12] for c in merged['commits'])}; "
             f"libvram sha256: {', '.join(merged['libraries'])}; {len(merged['files'])} files"]
    if not merged["workloads"] and not merged["tensor_cost"] and not merged["kernel_time"]:
        lines.append("no runs in these files")
        return "\n".join(lines)
    lines.append("(a repeat marked x failed: it is listed, not counted)")
    head = (f"{'workload/allocator':28} {'repeats':>9} {'steps or wall s':>26} {'step ms':>22} "
            f"{'NVML peak MiB':>26} {'peak reserved MiB':>26} {'driver calls':>20} {'fails':>5}")
    if merged["workloads"]:
        lines.append(head)
    for w, entry in merged["workloads"].items():
        mode = entry["length"][0]
        for a, c in entry["allocators"].items():
            time_cell = fmt_range(c["steps"]) if mode == "seconds" else fmt_range(c["wall_s"], spec=",.2f")
            lines.append(
                f"{w + '/' + a:28} {repeats_text(c):>9} {time_cell:>26} "
                f"{fmt_range(c['step_ms_median'], spec='.2f'):>22} {fmt_range(c['nvml_peak_bytes'], 2**20):>26} "
                f"{fmt_range(c['allocator_peak_reserved_bytes'], 2**20):>26} {fmt_range(c['driver_calls']):>20} "
                f"{c['failures']:>5}")
        v = entry.get("vram")
        if v:
            words = []
            if "nvml_peak_at_or_below_every_other" in v:
                diff = v["nvml_peak_minus_lowest_other"]
                where = "at or below every other's" if diff <= 0 else f"above {v['lowest_other']}'s"
                words.append(f"device peak {where} ({diff:+,.0f} bytes against {v['lowest_other']}'s)")
            if "vs_native" in v and v["vs_native"] is not None:
                what = "steps" if v["time_measure"] == "steps" else "wall time"
                side = "faster" if v["at_least_as_fast_as_native"] else "slower"
                where = {True: "within native's range", False: f"outside native's range ({side})",
                         None: "one run of native, no range"}[v["within_native_range"]]
                words.append(f"{what} {v['vs_native']:.3f}x native's median, {where}")
                if not v["same_repeats_as_native"]:
                    words.append("over other repeats than native's")
            kind, amount = entry["length"]
            lines.append(f"  vram on {w} ({amount:g} {kind} a run): " + ("; ".join(words) or "nothing to compare with"))
        for a, x in entry.get("variants", {}).items():
            what = "steps" if x["time_measure"] == "steps" else "wall time"
            ratios = [f"{x[f'vs_{b}']:.3f}x {b}'s" for b in ("vram", "native") if x[f"vs_{b}"] is not None]
            lines.append(f"  {a} on {w}: {what} " + (", ".join(ratios) or "nothing to compare with") + " (medians)")
    if merged["tensor_cost"]:
        if merged["workloads"]:
            lines.append("")
        lines.append(f"{'torch.empty + del, ns':22} {'repeats':>9} " +
                     " ".join(f"{k:>22}" for k in COST_SIZES + ('CPU tensor 4KiB',)))
        for a, c in merged["tensor_cost"].items():
            lines.append(f"{a:22} {repeats_text(c):>9} " +
                         " ".join(f"{fmt_range(c[k]):>22}" for k in COST_SIZES + ("cpu_4KiB_ns",)))
    for w, entry in merged["kernel_time"].items():
        if len(lines) > 2:
            lines.append("")
        lines.append(f"{'GPU time a step, ms':32} {'rounds':>9} {'step (CUDA events)':>26} {'kernels':>26} "
                     f"{'busy':>26} {'GPU waits':>20}   ({entry['steps']} steps profiled a round)")
        for a, c in entry["allocators"].items():
            lines.append(f"{w + '/' + a:32} {repeats_text(c):>9} {fmt_range(c['step_ms'], spec='.3f'):>26} "
                         f"{fmt_range(c['kernel_ms_per_step'], spec='.3f'):>26} "
                         f"{fmt_range(c['busy_ms_per_step'], spec='.3f'):>26} "
                         f"{fmt_range(c['wait_ms_per_step'], spec='.3f'):>20}")
        for a, x in entry["vs_native"].items():
            ratios = [f"{label} {x[m]:.4f}x" for m, label in (("step_ms", "step"), ("kernel_ms_per_step", "kernels"),
                                                               ("busy_ms_per_step", "busy")) if x[m] is not None]
            lines.append(f"  {a} on {w} against native (medians): " + (", ".join(ratios) or "nothing to compare with"))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", help="torch-bench.json files or folders holding torch-bench*.json")
    ap.add_argument("--json", help="write the merged summary here")
    ap.add_argument("--allow-commits", action="store_true",
                    help="merge runs built from different commits (that share the pool's code)")
    args = ap.parse_args(argv)
    try:
        docs = [(str(p), load(p)) for p in files_of(args.inputs)]
        merged = merge(docs, args.allow_commits)
    except MergeError as e:
        print(f"merge.py: {e}", file=sys.stderr)
        return 2
    print(table(merged))
    if args.json:
        try:
            Path(args.json).write_text(json.dumps(merged, indent=1) + "\n")
        except OSError as e:
            print(f"merge.py: --json {args.json}: {e.strerror}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
