"""The table of a run of every judged trace on a GPU (docs/gpu-results.md), from `vram replay --json`.

    python3 bench/replay_table.py REPLAY_CUDA_JSON [--sim REPLAY_SIM_JSON] [--json]

REPLAY_CUDA_JSON is `vram replay TRACES --policy vram,torch-native,torch-expandable --device cuda --json`.
Prints, per trace: reserved over live under each of the three; the driver share (the time the allocator's
device calls took over the trace's duration); vram's device calls (every kind, events included); and vram's
warm-up, its driver time until the trace first reaches its peak live, over torch-native's. Then the
synchronizations and failures over all replays, and vram's calls by kind (count, mean time, share of vram's
driver time).

With --sim (the same replays on the simulated device): how many replays of each policy made the same peak
reserved bytes and the same device calls on both, and the measured driver time over the simulated device's
modelled time for vram on each trace, and how many of all the replays have a model within 20% of the
measurement (|modelled - measured| <= 0.2 x measured).
--json prints the same as one object."""
import argparse
import json
import sys

POLICIES = ("vram", "torch-expandable", "torch-native")


def name(row):
    # vram replay names a trace by its file's name less the extensions it knows; a .vtrace keeps its own.
    t = row["trace"]
    return t[: -len(".vtrace")] if t.endswith(".vtrace") else t


def index(rows, where):
    """The rows by (trace, policy); two replays of one trace under one policy cannot be told apart."""
    by = {}
    for r in rows:
        key = (name(r), r["policy"])
        if key in by:
            raise SystemExit(f"replay_table: {where}: {key[0]} replayed twice under {key[1]}")
        by[key] = r
    return by


def driver_seconds(row):
    return sum(row["device_call_seconds"].values())


def summarize(rows, sim=None):
    by = index(rows, "the replays")
    traces = list(dict.fromkeys(name(r) for r in rows))
    missing = [(t, p) for t in traces for p in POLICIES if (t, p) not in by]
    if missing:
        raise SystemExit(f"replay_table: no replay of {missing[0][0]} under {missing[0][1]}")
    out = {"traces": [], "kinds": {}}
    for t in traces:
        v, n = by[(t, "vram")], by[(t, "torch-native")]
        out["traces"].append({
            "trace": t,
            "reserved_over_live": {p: by[(t, p)]["peak_reserved_bytes"] / by[(t, p)]["peak_live_bytes"] for p in POLICIES},
            "driver_share": {p: driver_seconds(by[(t, p)]) / by[(t, p)]["trace_seconds"] for p in POLICIES},
            "vram_calls": sum(v["device_calls"].values()),
            "warmup_vs_native": (v["warmup_driver_seconds"] / n["warmup_driver_seconds"]
                                 if n["warmup_driver_seconds"] > 0 else None),
        })
        for kind, seconds in v["device_call_seconds"].items():
            k = out["kinds"].setdefault(kind, {"calls": 0, "seconds": 0.0})
            k["calls"] += v["device_calls"].get(kind, 0)
            k["seconds"] += seconds
    out["synchronizations"] = sum(r["synchronizations"] for r in rows)
    out["failed_allocations"] = sum(r["failed_allocations"] for r in rows)
    if sim is not None:
        s = index(sim, "the simulated replays")
        same, within, ratios = {}, 0, {}
        for key, r in by.items():
            if key not in s:
                raise SystemExit(f"replay_table: {key[0]} under {key[1]} is not in the simulated replays")
            m = s[key]
            agree = m["peak_reserved_bytes"] == r["peak_reserved_bytes"] and m["device_calls"] == r["device_calls"]
            same.setdefault(key[1], [0, 0])
            same[key[1]][0] += agree
            same[key[1]][1] += 1
            measured = driver_seconds(r)
            ratio = measured / m["modelled_driver_seconds"] if m["modelled_driver_seconds"] > 0 else None
            # The measure: the model within 20% of the measurement.
            within += measured > 0 and abs(m["modelled_driver_seconds"] - measured) <= 0.2 * measured
            if key[1] == "vram":
                ratios[key[0]] = ratio
        out["same_as_sim"] = same
        out["measured_over_model_vram"] = ratios
        out["within_20_percent"] = [within, len(by)]
    return out


def pct(x):
    return f"{100 * x:.5f}%" if x < 1e-5 else f"{100 * x:.3f}%"


def render(s):
    lines = ["| trace | reserved / live: vram | expandable | native | driver share, GPU: vram | expandable | native "
             "| vram's calls | vram's warm-up / native's |", "|---|---|---|---|---|---|---|---|---|"]
    for t in s["traces"]:
        rl, ds = t["reserved_over_live"], t["driver_share"]
        w = "-" if t["warmup_vs_native"] is None else f"{t['warmup_vs_native']:.2f}x"
        lines.append(f"| {t['trace']} | {rl['vram']:.4f} | {rl['torch-expandable']:.4f} | {rl['torch-native']:.4f} "
                     f"| {pct(ds['vram'])} | {pct(ds['torch-expandable'])} | {pct(ds['torch-native'])} "
                     f"| {t['vram_calls']:,} | {w} |")
    lines.append("")
    lines.append(f"synchronizations: {s['synchronizations']}; failed allocations: {s['failed_allocations']}")
    total = sum(k["seconds"] for k in s["kinds"].values())
    for kind, k in sorted(s["kinds"].items(), key=lambda kv: -kv[1]["seconds"]):
        if k["calls"] and total > 0:
            lines.append(f"vram's {kind}: {k['calls']:,} calls, {1e6 * k['seconds'] / k['calls']:.1f} us each, "
                         f"{100 * k['seconds'] / total:.0f}% of vram's driver time")
    if "same_as_sim" in s:
        lines.append("same bytes and calls as the simulated device: " +
                     ", ".join(f"{p} {a} of {n}" for p, (a, n) in s["same_as_sim"].items()))
        lines.append("measured over modelled, vram: " + ", ".join(
            f"{t} {'-' if r is None else f'{r:.2f}'}" for t, r in s["measured_over_model_vram"].items()))
        lines.append(f"the model within 20% of the measurement: {s['within_20_percent'][0]} of {s['within_20_percent'][1]} replays")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cuda")
    ap.add_argument("--sim")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        rows = json.load(open(a.cuda))
        sim = json.load(open(a.sim)) if a.sim else None
    except (OSError, ValueError) as e:
        raise SystemExit(f"replay_table: {e}")
    if not isinstance(rows, list) or not rows:
        raise SystemExit(f"replay_table: {a.cuda}: not a list of replays")
    s = summarize(rows, sim)
    print(json.dumps(s, indent=1) if a.json else render(s))


if __name__ == "__main__":
    sys.exit(main())
