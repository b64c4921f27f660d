"""Records the PyTorch memory snapshots in this folder, on a CUDA device (run with PyTorch and a GPU):

    python3 make_snapshots.py OUTDIR

Each case writes OUTDIR/<case>.pickle (what torch.cuda.memory._dump_snapshot writes) and appends to
OUTDIR/expected.json what PyTorch itself reported for the run: max_memory_reserved, max_memory_allocated,
and the number of trace entries, so that a test can compare vram's reading and replay with them.
The cases:
  - mlp_train: a small MLP trained for 6 steps under the default allocator, recorded from the start;
  - preexisting: tensors allocated before recording starts and freed during it, and some still live at the end;
  - ring: the same training with max_entries=300, so the oldest entries are dropped;
  - expandable: the training under expandable_segments:True (segment_map / segment_unmap);
  - snapshot_dict: torch.cuda.memory._snapshot() pickled by the program itself, with no frames.
Each case runs in its own process so that its allocator starts empty.
"""
import json
import os
import pickle
import subprocess
import sys


def train(torch, steps=6, width=1024, batch_sizes=(64, 256, 96, 512, 128, 320)):
    model = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(steps):
        x = torch.randn(batch_sizes[step % len(batch_sizes)], width, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return model, opt


def run_case(case, outdir):
    if case == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    torch.cuda.init()
    held = []
    if case == "preexisting":
        held = [torch.empty(n, dtype=torch.uint8, device="cuda") for n in (3 << 20, 5000, 40 << 20)]
    stacks = "python"
    if case == "snapshot_dict":
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python")
    elif case == "ring":
        torch.cuda.memory._record_memory_history(max_entries=300, stacks=stacks)
    else:
        torch.cuda.memory._record_memory_history(stacks=stacks)
    model, opt = train(torch)
    if case == "preexisting":
        del held[1]  # freed during the recording; the other two stay live to the end
    path = os.path.join(outdir, case + ".pickle")
    if case == "snapshot_dict":
        with open(path, "wb") as f:
            pickle.dump(torch.cuda.memory._snapshot(), f)
    else:
        torch.cuda.memory._dump_snapshot(path)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    result = {
        "case": case,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0),
        "max_memory_reserved": torch.cuda.max_memory_reserved(),
        "max_memory_allocated": torch.cuda.max_memory_allocated(),
        "memory_reserved_at_end": torch.cuda.memory_reserved(),
        "memory_allocated_at_end": torch.cuda.memory_allocated(),
        "trace_entries": len(snap["device_traces"][0]),
        "bytes": os.path.getsize(path),
    }
    print(json.dumps(result), flush=True)


def main():
    if len(sys.argv) == 3:
        run_case(sys.argv[2], sys.argv[1])
        return
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    results = []
    for case in ("mlp_train", "preexisting", "ring", "expandable", "snapshot_dict"):
        out = subprocess.run([sys.executable, __file__, outdir, case], check=True, capture_output=True, text=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    with open(os.path.join(outdir, "expected.json"), "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
