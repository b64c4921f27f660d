"""`vram record` on a GPU machine: exact calls from a program of our own, and a PyTorch run.

    python3 tests/gpu/record_check.py --vram build/vram --calls /tmp/record_calls --out OUTDIR

1. record_calls (tests/gpu/record_calls.cu) makes a known sequence of device-memory calls and writes it;
   the recording, converted to the torch CSV, must hold exactly those (action, address, size), in order.
2. The transformer workload of bench/torch under PyTorch's own allocator (plain, and with expandable
   segments), recorded by `vram record`: its peak of live cudaMalloc'd bytes (plain) or of mapped bytes
   (expandable) must equal PyTorch's max_memory_reserved() within one segment (the largest the recording
   holds).
Writes OUTDIR/record-check.json and exits 1 when a check fails.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def torch_child(steps, report):
    import torch
    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    import workloads
    w = workloads.make("transformer_train")
    w.setup("cuda")
    for i in range(steps):
        w.step(i)
    torch.cuda.synchronize()
    with open(report, "w") as f:
        json.dump({"max_memory_reserved": torch.cuda.max_memory_reserved(),
                   "max_memory_allocated": torch.cuda.max_memory_allocated(),
                   "settings": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}, f)


def rows_of(vram, recording, out_csv):
    subprocess.run([vram, "convert", recording, "-o", out_csv, "--to", "torch", "--force"], check=True,
                   capture_output=True)
    with open(out_csv) as f:
        return list(csv.DictReader(f))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vram")
    p.add_argument("--calls")
    p.add_argument("--out")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--torch-child", nargs=2, metavar=("STEPS", "REPORT"))
    a = p.parse_args()
    if a.torch_child:
        torch_child(int(a.torch_child[0]), a.torch_child[1])
        return 0
    os.makedirs(a.out, exist_ok=True)
    result = {"ok": True}

    # 1. the known calls
    expected_path = os.path.join(a.out, "calls-expected.jsonl")
    recording = os.path.join(a.out, "calls.vram")
    run = subprocess.run([a.vram, "record", "-o", recording, "--json", "--", a.calls, expected_path],
                         capture_output=True, text=True)
    result["calls_record_status"] = run.returncode
    result["calls_record_stderr"] = run.stderr[-2000:]
    expected = [json.loads(line) for line in open(expected_path)]
    rows = rows_of(a.vram, recording, os.path.join(a.out, "calls.csv"))
    got = [{"action": r["action"], "addr": int(r["addr"]), "size": int(r["size"])} for r in rows]
    result["calls_expected"] = expected
    result["calls_recorded"] = got
    result["calls_exact"] = got == expected
    result["ok"] &= result["calls_exact"]
    print(f"known calls: {len(expected)} made, {len(got)} recorded, exact: {result['calls_exact']}", flush=True)

    # 2. PyTorch
    for name, settings in (("torch_native", ""), ("torch_expandable", "expandable_segments:True")):
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        if settings:
            env["PYTORCH_CUDA_ALLOC_CONF"] = settings
        report = os.path.join(a.out, name + "-torch.json")
        rec = os.path.join(a.out, name + ".vram")
        run = subprocess.run([a.vram, "record", "-o", rec, "--json", "--", sys.executable, __file__, "--torch-child",
                              str(a.steps), report], capture_output=True, text=True, env=env)
        if run.returncode != 0:
            result[name] = {"error": run.stderr[-3000:], "status": run.returncode}
            result["ok"] = False
            print(f"{name}: vram record exited {run.returncode}:\n{run.stderr[-3000:]}", flush=True)
            continue
        summary = json.loads(run.stdout)
        torch_report = json.load(open(report))
        rows = rows_of(a.vram, rec, os.path.join(a.out, name + ".csv"))
        largest = max((int(r["size"]) for r in rows if r["action"] in ("alloc", "segment_map")), default=0)
        peak = summary[0]["peak_mapped_bytes"] if settings else summary[0]["peak_live_bytes"]
        reserved = torch_report["max_memory_reserved"]
        row = {"recording": summary, "torch": torch_report, "recorded_peak": peak,
               "largest_segment": largest, "difference": peak - reserved if peak is not None else None,
               "stderr": run.stderr[-2000:]}
        row["within_one_segment"] = peak is not None and abs(peak - reserved) <= largest
        result[name] = row
        result["ok"] &= row["within_one_segment"]
        print(f"{name}: PyTorch max_memory_reserved {reserved}, recorded peak {peak} (difference {row['difference']}, "
              f"largest segment {largest}), events {summary[0]['events']}", flush=True)

    with open(os.path.join(a.out, "record-check.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
