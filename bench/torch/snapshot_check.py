"""PyTorch's own memory snapshots of the bench/torch workloads, read and replayed by vram (GPU machine):

    python3 bench/torch/snapshot_check.py --vram build/vram --out OUTDIR [--steps N] [--requests N]

For each case, a process of its own runs the workload under PyTorch's allocator with
torch.cuda.memory._record_memory_history() on from the start (stacks="python"), dumps the snapshot with
_dump_snapshot, and reports max_memory_reserved / max_memory_allocated. Then `vram replay SNAPSHOT --policy
torch-native,torch-expandable,vram --device sim --json` replays it, and the emulation of the allocator the
run used (torch-native, or torch-expandable under expandable_segments:True) must give the same peak
reserved within 0.5%. Writes OUTDIR/snapshot-check.json (one object per case) and the snapshots.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [
    # name, workload, allocator settings
    ("transformer_train", "transformer_train", ""),
    ("transformer_train_expandable", "transformer_train", "expandable_segments:True"),
    ("cnn_train", "cnn_train", ""),
    ("serving", "serving", ""),
    ("serving_expandable", "serving", "expandable_segments:True"),
]


def record(case, workload, steps, path):
    """Runs in a child process: the workload under history recording, then the snapshot."""
    import torch
    sys.path.insert(0, HERE)
    import workloads
    w = workloads.make(workload)
    torch.cuda.memory._record_memory_history(stacks="python", max_entries=10_000_000)
    t0 = time.time()
    w.setup("cuda")
    for i in range(steps):
        w.step(i)
    torch.cuda.synchronize()
    seconds = time.time() - t0
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)
    return {
        "case": case,
        "workload": workload,
        "steps": steps,
        "settings": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "run_seconds": seconds,
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "snapshot_bytes": os.path.getsize(path),
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vram", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--child", nargs=4, metavar=("CASE", "WORKLOAD", "STEPS", "PATH"))
    a = p.parse_args()
    if a.child:
        case, workload, steps, path = a.child
        print(json.dumps(record(case, workload, int(steps), path)), flush=True)
        return
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for case, workload, settings in CASES:
        path = os.path.join(a.out, case + ".pickle")
        steps = a.requests if workload == "serving" else a.steps
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if settings:
            env["PYTORCH_CUDA_ALLOC_CONF"] = settings
        child = subprocess.run([sys.executable, __file__, "--vram", a.vram, "--out", a.out, "--child", case, workload,
                                str(steps), path], env=env, capture_output=True, text=True)
        if child.returncode != 0:
            print(f"{case}: the run failed:\n{child.stderr[-3000:]}", flush=True)
            continue
        row = json.loads(child.stdout.strip().splitlines()[-1])
        t0 = time.time()
        rep = subprocess.run([a.vram, "replay", path, "--policy", "torch-native,torch-expandable,vram", "--device",
                              "sim", "--json"], capture_output=True, text=True)
        row["replay_wall_seconds"] = time.time() - t0
        row["vram_notes"] = rep.stderr.strip().splitlines()
        if rep.returncode not in (0, 3):
            print(f"{case}: vram replay failed ({rep.returncode}):\n{rep.stderr[-3000:]}", flush=True)
            continue
        replays = json.loads(rep.stdout)
        row["replays"] = {r["policy"]: {k: r[k] for k in ("events", "peak_live_bytes", "peak_reserved_bytes",
                                                           "recorded_peak_reserved_bytes", "failed_allocations",
                                                           "device_calls", "modelled_driver_seconds",
                                                           "trace_seconds")} for r in replays}
        same = "torch-expandable" if settings else "torch-native"
        emulated = row["replays"][same]["peak_reserved_bytes"]
        row["emulation"] = same
        row["emulated_over_reported"] = emulated / row["max_memory_reserved"]
        row["recorded_over_reported"] = row["replays"][same]["recorded_peak_reserved_bytes"] / row["max_memory_reserved"]
        row["within_half_percent"] = abs(row["emulated_over_reported"] - 1) <= 0.005
        rows.append(row)
        print(f"{case}: {row['replays'][same]['events']} events, PyTorch reserved {row['max_memory_reserved']}, "
              f"{same} replay {emulated} ({row['emulated_over_reported']:.4f}x), recorded segments "
              f"{row['replays'][same]['recorded_peak_reserved_bytes']}; vram "
              f"{row['replays']['vram']['peak_reserved_bytes']}; snapshot {row['snapshot_bytes']} bytes", flush=True)
    with open(os.path.join(a.out, "snapshot-check.json"), "w") as f:
        json.dump(rows, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
