"""The simulated device's cost model against an H200: modelled driver time beside measured, per call kind,
for the same replays, and the per-call costs that bench_vmm measured by handle size beside the model's.

    python3 bench/calibrate.py RESULTS_DIR [--json]
    python3 bench/calibrate.py RESULTS_DIR --fit
    python3 bench/calibrate.py RESULTS_DIR --check REPLAY_SIM_JSON

RESULTS_DIR holds replay-sim.json (`vram replay ... --device sim --json`), replay-cuda-N.json (the same
replays with --device cuda, N = 1, 2, ...) and vmm.json (bench_vmm --benchmark_format=json, with
repetitions). Prints, for every trace x policy and call kind costing 0.1 ms or more, the modelled time, the
measured median and their ratio, then each trace x policy's total; then bench_vmm's medians per handle size
beside the model's curve (src/vram/device/cost_model.cpp). --json prints the same as one object.

--fit fits the measured machine's model: one factor per call kind, the measured time of that kind over every
replay divided by its modelled time (kinds the replays did not make keep the table's figures), and prints
each trace x policy's measured total over the scaled model's, fitted on every trace and fitted on the other
traces only (leave one trace out). --check compares a replay made with that model (`--device sim:costs=lent`)
with the measurements: measured over modelled, in total, for each trace x policy."""
import glob
import json
import os
import statistics
import sys

# The model's curves for the virtual memory calls (cost_model::h200(), in µs), at its sizes in MiB.
MODEL_SIZES = [2, 8, 32, 128, 512, 1024]
MODEL = {
    "Create": [8.5, 9.0, 12.5, 8.0, 12.5, 17.5],
    "Map": [0.7, 0.7, 0.95, 0.6, 0.65, 0.8],
    "SetAccess": [22.0, 22.0, 38.0, 33.0, 45.0, 57.5],
    "Unmap": [15.0, 15.0, 23.0, 20.0, 24.5, 29.0],
    "Release": [10.5, 14.0, 25.5, 39.5, 136.5, 272.0],
}


def model_at(kind, mib):
    """The model's cost at a size: linear in log2(size) between its points, flat beyond them."""
    import math
    xs = [math.log2(s) for s in MODEL_SIZES]
    ys = MODEL[kind]
    x = math.log2(mib)
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = next(i for i in range(1, len(xs)) if xs[i] >= x)
    return ys[i - 1] + (x - xs[i - 1]) / (xs[i] - xs[i - 1]) * (ys[i] - ys[i - 1])


def replays(folder):
    sim = {(r["trace"], r["policy"]): r for r in json.load(open(os.path.join(folder, "replay-sim.json")))}
    runs = []
    for path in sorted(glob.glob(os.path.join(folder, "replay-cuda-*.json"))):
        runs.append({(r["trace"], r["policy"]): r for r in json.load(open(path))})
    rows = []
    for key in sorted(sim):
        s = sim[key]
        kinds = []
        for kind, calls in s["device_calls"].items():
            modelled = s["device_call_seconds"][kind] * 1e3
            measured = [run[key]["device_call_seconds"].get(kind, 0.0) * 1e3 for run in runs if key in run]
            if not measured:
                continue
            med = statistics.median(measured)
            if max(modelled, med) < 0.1:
                continue
            kinds.append({"kind": kind, "calls": calls, "modelled_ms": modelled, "measured_ms": measured,
                          "ratio": med / modelled if modelled else None})
        total_m = s["modelled_driver_seconds"] * 1e3
        total = [run[key]["modelled_driver_seconds"] * 1e3 for run in runs if key in run]
        rows.append({"trace": key[0], "policy": key[1], "kinds": kinds, "modelled_ms": total_m, "measured_ms": total,
                     "ratio": statistics.median(total) / total_m if total_m else None})
    return rows


def vmm(folder):
    data = json.load(open(os.path.join(folder, "vmm.json")))
    out = []
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median" or b.get("error_occurred"):
            continue
        parts = b["run_name"].split("/")
        kind, mib = parts[0], int(parts[1])
        count = int(parts[2]) if len(parts) > 2 and parts[2] != "manual_time" else 1
        batched = len(parts) > 3 and parts[3] == "1"
        per = b.get("us_per_handle", b["real_time"])
        out.append({"kind": kind, "mib": mib, "handles": count, "one_call": batched, "us_per_handle": per,
                    "model_us": model_at(kind, mib) if kind in MODEL else None})
    return out


def per_kind(folder):
    """(trace, policy) -> (modelled seconds by kind, median measured seconds by kind)."""
    sim = {(r["trace"], r["policy"]): r for r in json.load(open(os.path.join(folder, "replay-sim.json")))}
    runs = [{(r["trace"], r["policy"]): r for r in json.load(open(p))}
            for p in sorted(glob.glob(os.path.join(folder, "replay-cuda-*.json")))]
    out = {}
    for key, s in sim.items():
        modelled = s["device_call_seconds"]
        measured = {k: statistics.median([run[key]["device_call_seconds"].get(k, 0.0) for run in runs if key in run])
                    for k in modelled}
        out[key] = (modelled, measured)
    return out


def factors(rows):
    kinds = sorted({k for m, _ in rows for k in m})
    f = {}
    for k in kinds:
        den = sum(m.get(k, 0.0) for m, _ in rows)
        f[k] = sum(me.get(k, 0.0) for _, me in rows) / den if den else 1.0
    return f


def fit(folder):
    data = per_kind(folder)
    f = factors(list(data.values()))
    print("factor by call kind (measured / modelled, over every replay):")
    for k, v in f.items():
        print(f"  {k:16} {v:5.2f}")
    print(f"{'trace':18} {'policy':17} {'measured ms':>11} {'fitted':>7} {'leave one out':>13}")
    worst = 0.0
    for key in sorted(data):
        modelled, measured = data[key]
        others = factors([v for k2, v in data.items() if k2[0] != key[0]])
        total = sum(measured.values())
        r_all = total / sum(m * f.get(k, 1.0) for k, m in modelled.items())
        r_loo = total / sum(m * others.get(k, 1.0) for k, m in modelled.items())
        worst = max(worst, abs(r_all - 1), abs(r_loo - 1))
        print(f"{key[0]:18} {key[1]:17} {total * 1e3:11.2f} {r_all:7.2f} {r_loo:13.2f}")
    print(f"worst: {worst * 100:.1f}% off")
    return 0


def check(folder, replay_json):
    data = per_kind(folder)
    lent = {(r["trace"], r["policy"]): r for r in json.load(open(replay_json))}
    print(f"{'trace':18} {'policy':17} {'model ms':>9} {'measured ms':>11} {'ratio':>6}")
    worst = 0.0
    for key in sorted(data):
        if key not in lent:
            continue
        modelled = lent[key]["modelled_driver_seconds"]
        total = sum(data[key][1].values())
        worst = max(worst, abs(total / modelled - 1))
        print(f"{key[0]:18} {key[1]:17} {modelled * 1e3:9.2f} {total * 1e3:11.2f} {total / modelled:6.2f}")
    print(f"worst: {worst * 100:.1f}% off")
    return 0


def main(folder, as_json):
    rows, calls = replays(folder), vmm(folder)
    if as_json:
        print(json.dumps({"replays": rows, "calls": calls}, indent=1))
        return 0
    print(f"{'trace':18} {'policy':17} {'kind':14} {'calls':>6} {'model ms':>9} {'measured ms (median)':>21} {'ratio':>6}")
    for r in rows:
        for k in r["kinds"]:
            print(f"{r['trace']:18} {r['policy']:17} {k['kind']:14} {k['calls']:6} {k['modelled_ms']:9.2f} "
                  f"{statistics.median(k['measured_ms']):21.2f} {k['ratio'] or 0:6.2f}")
        print(f"{r['trace']:18} {r['policy']:17} {'total':14} {'':6} {r['modelled_ms']:9.2f} "
              f"{statistics.median(r['measured_ms']):21.2f} {r['ratio'] or 0:6.2f}")
    print()
    print(f"{'call':10} {'MiB':>5} {'handles':>7} {'one call':>8} {'µs a handle':>11} {'model µs':>9} {'ratio':>6}")
    for c in calls:
        m = c["model_us"]
        print(f"{c['kind']:10} {c['mib']:5} {c['handles']:7} {'yes' if c['one_call'] else 'no':>8} "
              f"{c['us_per_handle']:11.2f} {m if m is not None else float('nan'):9.2f} "
              f"{c['us_per_handle'] / m if m else float('nan'):6.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    if "--fit" in sys.argv[2:]:
        sys.exit(fit(sys.argv[1]))
    if "--check" in sys.argv[2:]:
        sys.exit(check(sys.argv[1], sys.argv[sys.argv.index("--check") + 1]))
    sys.exit(main(sys.argv[1], "--json" in sys.argv[2:]))
