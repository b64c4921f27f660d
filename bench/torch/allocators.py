"""The four allocators the PyTorch benchmarks compare, and how each is set up.

native      PyTorch's caching allocator, default settings
expandable  the caching allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
async       PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (the driver's stream-ordered pool)
vram        vram's pool through CUDAPluggableAllocator (vram.torch.enable() before CUDA starts)

PyTorch reads PYTORCH_CUDA_ALLOC_CONF when it is imported, so the variable is set in the child's
environment by the drivers (child_env) and checked in the child before torch is imported (check_env).
"""
import json
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAMES = ("native", "expandable", "async", "vram")
CONF = {"native": None, "expandable": "expandable_segments:True",
        "async": "backend:cudaMallocAsync", "vram": None}
CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def default_library():
    lib = os.environ.get("VRAM_LIBRARY")
    if lib:
        return lib
    path = REPO / "build" / "libvram.so"
    return str(path) if path.exists() else None


def vram_env(env=None):
    """The VRAM_* settings in an environment (the pool's options, docs/pool.md), VRAM_LIBRARY aside."""
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if k.startswith("VRAM_") and k != "VRAM_LIBRARY"}


def child_env(name, base=None):
    """The environment of a child process that runs allocator `name`."""
    env = dict(os.environ if base is None else base)
    for var in CONF_VARS:
        env.pop(var, None)
    if CONF[name]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = CONF[name]
    env["PYTHONUNBUFFERED"] = "1"
    lib = default_library()
    if lib:
        env["VRAM_LIBRARY"] = lib
    paths = [str(REPO / "python")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def check_env(name):
    """Before torch is imported: make sure the allocator configuration is the one `name` needs.

    Returns a note for the report. Sets the variable when it is missing; refuses a conflicting one.
    """
    if name not in CONF:
        raise SystemExit(f"unknown allocator {name!r}; one of {', '.join(NAMES)}")
    if "torch" in sys.modules:
        raise SystemExit("check_env must run before torch is imported")
    want = CONF[name]
    have = {var: os.environ.get(var) for var in CONF_VARS if os.environ.get(var) is not None}
    if have == ({"PYTORCH_CUDA_ALLOC_CONF": want} if want else {}):
        note = "from environment"
    elif not have:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = want
        note = "set by the benchmark before importing torch"
    else:
        raise SystemExit(f"allocator {name} needs PYTORCH_CUDA_ALLOC_CONF={want or '(unset)'}, "
                         f"but the environment has {have}")
    if name == "vram":
        if str(REPO / "python") not in sys.path:
            sys.path.insert(0, str(REPO / "python"))
        lib = default_library()
        if lib:
            os.environ["VRAM_LIBRARY"] = lib
    return note


def setup(torch, name, limit_bytes=None):
    """After torch is imported, before any CUDA tensor: install the allocator, start CUDA, apply a limit."""
    info = {"backend_reported": None, "limit_fraction": None}
    if name == "vram":
        import vram
        import vram.torch  # noqa: F401  (the submodule, if the package does not import it itself)
        if limit_bytes:
            vram.torch.enable(limit=int(limit_bytes))
        else:
            vram.torch.enable()
        info["vram_library"] = os.environ.get("VRAM_LIBRARY")
    torch.cuda.init()
    if limit_bytes and name != "vram":
        total = torch.cuda.get_device_properties(0).total_memory
        fraction = min(1.0, float(limit_bytes) / float(total))
        torch.cuda.set_per_process_memory_fraction(fraction, 0)
        info["limit_fraction"] = fraction
    try:
        info["backend_reported"] = torch.cuda.memory.get_allocator_backend()
    except Exception as e:  # noqa: BLE001
        info["backend_reported"] = f"unknown ({type(e).__name__})"
    return info


def empty_cache(torch, name):
    """After an out-of-memory failure: give cached memory back (not reachable through PyTorch for vram)."""
    if name != "vram":
        torch.cuda.empty_cache()


def _get(d, key):
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) else None


def stats(torch, name):
    """The allocator's own figures after a run. Every field is None where the allocator has no such figure."""
    out = {"allocator_peak_reserved_bytes": None, "allocator_peak_allocated_bytes": None,
           "driver_calls": None, "allocator_num_ooms": None, "allocator_raw": {}}
    if name == "vram":
        import vram
        s = dict(vram.memory_stats(0))
        parts = [_get(s, k) for k in ("num_device_alloc", "num_device_free", "vram.maps", "vram.unmaps")]
        out.update(allocator_peak_reserved_bytes=_get(s, "reserved_bytes.all.peak"),
                   allocator_peak_allocated_bytes=_get(s, "allocated_bytes.all.peak"),
                   driver_calls=sum(parts) if None not in parts else None,
                   allocator_num_ooms=_get(s, "num_ooms"), allocator_raw=s)
        return out
    s = torch.cuda.memory_stats(0)
    keys = ("num_device_alloc", "num_device_free", "num_alloc_retries", "num_ooms",
            "num_sync_all_streams", "reserved_bytes.all.peak", "allocated_bytes.all.peak")
    out["allocator_raw"] = {k: s.get(k) for k in keys if k in s}
    out["allocator_peak_allocated_bytes"] = int(torch.cuda.max_memory_allocated(0))
    out["allocator_num_ooms"] = _get(s, "num_ooms")
    if name == "async":
        out["allocator_peak_reserved_bytes"] = _get(s, "reserved_bytes.all.peak")
    else:
        out["allocator_peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved(0))
        a, f = _get(s, "num_device_alloc"), _get(s, "num_device_free")
        out["driver_calls"] = a + f if a is not None and f is not None else None
        try:  # the check that expandable segments were really in use
            segs = torch.cuda.memory_snapshot()
            out["allocator_raw"]["expandable_segments_seen"] = any(
                bool(seg.get("is_expandable")) for seg in segs)
        except Exception:  # noqa: BLE001
            pass
    return out


def finish(report, json_path, line, rc, t_process, close_recording=True):
    """Ends a measuring child: its report to @p json_path (then @p line, one line for the log) or printed,
    then the process, without the interpreter's teardown (the allocator's library may be unloaded before the
    last free). With @p close_recording, vram's recording (VRAM_RECORD) is closed first, as os._exit runs
    no exit handler."""
    report["process_s"] = time.perf_counter() - t_process
    text = json.dumps(report, indent=1, default=str)
    if json_path:
        Path(json_path).parent.mkdir(parents=True, exist_ok=True)
        Path(json_path).write_text(text + "\n")
        print(line)
    else:
        print(text)
    sys.stdout.flush()
    sys.stderr.flush()
    if close_recording and report.get("allocator") == "vram":
        import vram
        vram.record_stop()
    os._exit(rc)
