#!/usr/bin/env python3
"""vram under PyTorch on a real GPU: run on a machine with CUDA and PyTorch (bench/torch/gpu-session does).

    PYTHONPATH=python VRAM_LIBRARY=build/libvram.so python3 python/tests/torch_gpu_check.py [--json OUT]

Prints a PASS or FAIL line for each check and exits 1 if any failed:
  - enable() puts PyTorch's tensors in the pool, through libvram_torch.so where it was built;
  - a matrix product on the GPU equals the CPU's, on the default stream and on a side stream;
  - the pool's statistics see the tensors come and go; empty_cache gives memory back;
  - the recording started by enable(record=...) holds every allocation and free the pool counted;
  - an allocation past a limit raises torch.OutOfMemoryError with vram's explanation, and the process goes on;
  - CUDA graph capture is refused with VramError.
"""
import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vram  # noqa: E402
import vram.torch  # noqa: E402

MiB = 1 << 20
results = []


def check(name, ok, detail=""):
    results.append({"check": name, "ok": bool(ok), "detail": str(detail)})
    print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    record = os.path.join(tempfile.mkdtemp(), "torch-check.vram")
    state = vram.torch.enable(record=record)
    import torch
    check("enable", vram.torch.enabled(), f"{state['library']} {state['functions']}")
    check("shim", state["functions"][0] == "vram_torch_malloc", state["library"])
    check("backend", torch.cuda.memory.get_allocator_backend() == "pluggable",
          torch.cuda.memory.get_allocator_backend())

    a = torch.randn(1024, 1024, device="cuda")
    b = a @ a
    expected = a.cpu() @ a.cpu()
    check("matmul", torch.allclose(b.cpu(), expected, rtol=1e-3, atol=1e-2), f"max diff {(b.cpu() - expected).abs().max():.2e}")
    s = vram.memory_stats()
    check("stats see the tensors", s["allocated_bytes.all.current"] >= 8 * MiB,
          f"allocated {s['allocated_bytes.all.current']}, reserved {s['reserved_bytes.all.current']}")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        c = torch.full((4096, 1024), 3.0, device="cuda")
        d = (c * 2).sum()
    torch.cuda.synchronize()
    check("side stream", d.item() == 6.0 * 4096 * 1024, d.item())
    del a, b, c, d
    torch.cuda.synchronize()
    after = vram.memory_stats()
    check("frees reach the pool", after["allocated_bytes.all.current"] < s["allocated_bytes.all.current"],
          f"allocated {after['allocated_bytes.all.current']}")
    released = vram.empty_cache()
    check("empty_cache", released > 0,
          f"released {released}, reserved now {vram.memory_reserved()}")

    vram.record_stop()
    s = vram.memory_stats()
    data = Path(record).read_bytes()
    events = int.from_bytes(data[16:24], "little")
    want = s["allocation.all.allocated"] + s["allocation.all.freed"] + s["num_ooms"]
    check("recording holds every call", data[:8] == b"\x89VRAMTR\n" and events == want,
          f"{events} events in {record}, the pool counted {want}")

    vram.set_memory_limit(vram.memory_reserved() + 64 * MiB)
    error = None
    try:
        x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        del x
    except Exception as e:  # noqa: BLE001
        error = e
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    check("out of memory is torch.OutOfMemoryError", isinstance(error, oom),
          f"{type(error).__name__}: {str(error)[:300]}")
    check("its message is vram's", error is not None and "vram" in str(error) and "1.00 GiB" in str(error),
          str(error)[:200])
    y = torch.ones(1024, device="cuda")
    check("the process goes on", y.sum().item() == 1024.0)
    vram.set_memory_limit(0)
    check("num_ooms", vram.memory_stats()["num_ooms"] == 1, vram.memory_stats()["num_ooms"])

    refused = None
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = y * 2
    except vram.VramError as e:
        refused = e
    except Exception as e:  # noqa: BLE001
        refused = e
    check("graph capture is refused", isinstance(refused, vram.VramError), f"{type(refused).__name__}: {refused}")
    check("the process goes on after the refusal", torch.ones(8, device="cuda").sum().item() == 8.0)

    print(vram.memory_summary())
    failed = [r for r in results if not r["ok"]]
    if args.json:
        Path(args.json).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                               "results": results, "summary": vram.memory_summary()}, indent=1))
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
