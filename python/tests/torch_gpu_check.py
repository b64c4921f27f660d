#!/usr/bin/env python3
"""vram under PyTorch on a real GPU: run on a machine with CUDA and PyTorch (bench/torch/gpu-session does).

    PYTHONPATH=python VRAM_LIBRARY=build/libvram.so python3 python/tests/torch_gpu_check.py [--json OUT]

Prints a PASS, FAIL or INFO line for each check and exits 1 if any failed (an exception in a step is a FAIL
of that step; the rest still run):
  - enable() puts PyTorch's tensors in the pool, through libvram_torch.so where it was built;
  - a matrix product on the GPU equals the CPU's, on the default stream and on a side stream;
  - the pool's statistics see the tensors come and go; empty_cache gives memory back;
  - the recording started by enable(record=...) holds every allocation and free the pool counted meanwhile;
  - an allocation past a limit raises torch.OutOfMemoryError with vram's explanation, and the process goes
    on (without the shim: says what happened instead, a tensor with a NULL pointer being what is expected);
  - CUDA graph capture is refused with VramError, and leaves the default stream current.
Not collected by unittest discover (no test_ prefix): CI has no GPU and no PyTorch.
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
VRAM_MAGIC = b"\x89VRAMTR\n"
results = []


def check(name, ok, detail=""):
    """A PASS / FAIL line (ok None: an INFO line, never a failure)."""
    results.append({"check": name, "ok": ok if ok is None else bool(ok), "detail": str(detail)})
    word = "INFO" if ok is None else "PASS" if ok else "FAIL"
    print(f"{word} {name}: {detail}", flush=True)


def step(name, fn, *args):
    """Runs one step; an exception is a FAIL named after the step."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        check(name, False, f"{type(e).__name__}: {e}")
        return None


def compute(torch):
    a = torch.randn(1024, 1024, device="cuda")
    b = a @ a
    expected = a.cpu() @ a.cpu()
    check("matmul", torch.allclose(b.cpu(), expected, rtol=1e-3, atol=1e-2),
          f"max diff {(b.cpu() - expected).abs().max():.2e}")
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
    check("empty_cache", released > 0 and vram.memory_reserved() == after["reserved_bytes.all.current"] - released,
          f"released {released}, reserved now {vram.memory_reserved()}")


def recording(path, before):
    vram.record_stop()
    s = vram.memory_stats()
    data = Path(path).read_bytes()
    events = int.from_bytes(data[16:24], "little")
    want = sum(s[k] - before[k] for k in ("allocation.all.allocated", "allocation.all.freed", "num_ooms"))
    check("recording holds every call", data[:8] == VRAM_MAGIC and events == want,
          f"{events} events in {path}, the pool counted {want}")


def out_of_memory(torch, shim):
    ooms = vram.memory_stats()["num_ooms"]
    vram.set_memory_limit(vram.memory_reserved() + 64 * MiB)
    error, pointer = None, None
    try:
        x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        pointer = x.data_ptr()
        del x
    except Exception as e:  # noqa: BLE001
        error = e
    finally:
        vram.set_memory_limit(0)
    oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    what = f"{type(error).__name__}: {str(error)[:300]}" if error else f"a tensor at data_ptr {pointer:#x}"
    if shim:
        check("out of memory is torch.OutOfMemoryError", isinstance(error, oom), what)
        check("its message is vram's", error is not None and "vram" in str(error) and "1.00 GiB" in str(error),
              str(error)[:200])
    else:
        check("out of memory without libvram_torch.so", None, what)
    check("num_ooms", vram.memory_stats()["num_ooms"] == ooms + 1, vram.memory_stats()["num_ooms"])
    check("the process goes on", torch.ones(1024, device="cuda").sum().item() == 1024.0)


def graph_capture(torch):
    y = torch.ones(8, device="cuda")
    refused = None
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = y * 2
    except Exception as e:  # noqa: BLE001
        refused = e
    check("graph capture is refused", isinstance(refused, vram.VramError), f"{type(refused).__name__}: {refused}")
    check("the default stream is current after the refusal",
          torch.cuda.current_stream() == torch.cuda.default_stream(), torch.cuda.current_stream())
    check("the process goes on after the refusal", torch.ones(8, device="cuda").sum().item() == 8.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="write the results here as JSON")
    args = ap.parse_args()
    record = os.path.join(tempfile.mkdtemp(), "torch-check.vram")
    state = step("enable", vram.torch.enable, record)
    if state is None:
        write(args.json, None, "")
        return 1
    import torch
    before = vram.memory_stats()  # device 0's pool, before PyTorch's first tensor
    shim = state["functions"][0] == "vram_torch_malloc"
    check("enable", vram.torch.enabled(), f"{state['library']} {state['functions']}")
    check("shim", True if shim else None, state["library"] if shim else "libvram_torch.so not built: "
          "libvram.so's own functions")
    check("backend", torch.cuda.memory.get_allocator_backend() == "pluggable",
          torch.cuda.memory.get_allocator_backend())
    step("compute", compute, torch)
    step("recording", recording, record, before)
    step("out of memory", out_of_memory, torch, shim)
    step("graph capture", graph_capture, torch)

    summary = step("memory_summary", vram.memory_summary) or ""
    print(summary)
    return write(args.json, torch, summary)


def write(path, torch, summary):
    """Writes the results as JSON to path (when given); returns the exit status."""
    failed = [r for r in results if r["ok"] is False]
    if path:
        device = step("device name", torch.cuda.get_device_name, 0) if torch else None
        Path(path).write_text(json.dumps({"device": device, "torch": torch.__version__ if torch else None,
                                          "results": results, "summary": summary}, indent=1))
    print(f"{sum(r['ok'] is True for r in results)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
