"""vram's GPU memory pool from Python, over libvram.so (docs/python.md).

The functions mirror torch.cuda's where the meaning is the same (memory_stats, memory_summary,
reset_peak_memory_stats, empty_cache, memory_allocated, ...), since PyTorch's own are empty when a pluggable
allocator such as vram serves its tensors. `vram.torch.enable()` puts PyTorch's CUDA tensors in the pool.

A device is an index, 'cuda:N', a torch.device, or None (the default: torch's current device once PyTorch
has started CUDA, else 0); an index below 0 or past a C int is a ValueError before the library is called. A failing call raises VramError (a RuntimeError) with the library's message and
vram.h's status as `.code`; an out-of-memory raises OutOfMemoryError, a VramError and a MemoryError. The
library is found and loaded on first use (vram._library says where it is looked for).

memory_stats() keys, with PyTorch's names where vram has the same figure:

| key | meaning |
|---|---|
| allocated_bytes.all.current | bytes in live blocks, rounded up to 512 as the pool stores them |
| allocated_bytes.all.peak | at or above the peak of .current: the most bytes in blocks handed out, live or kept in a thread's cache for reuse (a cached allocation is not watched, to keep it free of shared writes) |
| reserved_bytes.all.current / .peak | bytes the pool holds from the device |
| requested_bytes.all.current | bytes the program asked for, in live blocks |
| allocation.all.current / .allocated / .freed | live blocks; allocations made; frees made |
| num_ooms | allocations refused for lack of memory |
| num_alloc_retries | allocations that found the device full and recycled or released memory to try again, served or not |
| num_device_alloc / num_device_free | physical memory handles created / released (PyTorch: cudaMalloc / cudaFree) |
| vram.cached_bytes, vram.thread_cached_bytes, vram.pending_bytes, vram.mapped_bytes, vram.maps, vram.unmaps, vram.limit_bytes | vram's own |

PyTorch's keys that vram has no equivalent for are left out rather than faked: active_bytes,
inactive_split*, segment.*, oversize_*, max_split_size, num_sync_all_streams, and the small_pool /
large_pool breakdowns.
"""
import ctypes as _ctypes
import json as _json
import operator as _operator
import os as _os
import sys as _sys

from ._library import OutOfMemoryError, VramError, Stats as _Stats
from . import _library

__all__ = [
    "VramError", "OutOfMemoryError", "memory_stats", "memory_summary", "memory_snapshot", "reset_peak_memory_stats",
    "memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved", "empty_cache",
    "set_memory_limit", "get_memory_limit", "device_count", "device_name", "record_start", "record_stop",
    "library_path",
]


def _index(device):
    """A device index from an int, 'cuda:N', a torch.device, or None, 'cuda' and torch.device('cuda') for the
    current device: torch's once PyTorch has started CUDA, else 0. torch is never imported here."""
    if device is None:
        torch = _sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return 0
    if isinstance(device, bool):
        raise TypeError(f"device {device!r}: want an index, 'cuda:N' or a torch.device")
    if isinstance(device, int) or hasattr(type(device), "__index__"):  # an int, a numpy integer
        return _library.device_index(device)  # one the C API's int holds: ctypes would wrap a larger one
    index = getattr(device, "index", None)
    if getattr(device, "type", None) is not None:  # a torch.device
        if device.type != "cuda":
            raise ValueError(f"device {device}: vram serves CUDA devices")
        return _index(None) if index is None else _library.device_index(index)
    if isinstance(device, str):
        kind, _, number = device.partition(":")
        if kind == "cuda" and (number == "" or number.isascii() and number.isdigit()):
            return _library.device_index(int(number)) if number else _index(None)
        raise ValueError(f"device {device!r}: want an index, 'cuda:N' or a torch.device")
    raise TypeError(f"device {device!r}: want an index, 'cuda:N' or a torch.device")


def _stats(device):
    s = _Stats()
    _library.check(_library.load().vram_get_stats_sized(_index(device), _ctypes.byref(s), _ctypes.sizeof(s)))
    return s


def memory_stats(device=None):
    """The pool's figures for a device, with PyTorch's key names where the meaning is the same (see the
    module's table)."""
    index = _index(device)
    s = _stats(index)
    return {
        "allocated_bytes.all.current": s.allocated_bytes,
        "allocated_bytes.all.peak": s.peak_allocated_bytes,
        "reserved_bytes.all.current": s.reserved_bytes,
        "reserved_bytes.all.peak": s.peak_reserved_bytes,
        "requested_bytes.all.current": s.requested_bytes,
        "allocation.all.current": s.allocations - s.frees,
        "allocation.all.allocated": s.allocations,
        "allocation.all.freed": s.frees,
        "num_ooms": s.failed_allocations,
        "num_alloc_retries": s.alloc_retries,
        "num_device_alloc": s.handles_created,
        "num_device_free": s.handles_released,
        "vram.cached_bytes": s.cached_bytes,
        "vram.thread_cached_bytes": s.thread_cached_bytes,
        "vram.pending_bytes": s.pending_bytes,
        "vram.mapped_bytes": s.mapped_bytes,
        "vram.maps": s.maps,
        "vram.unmaps": s.unmaps,
        "vram.limit_bytes": get_memory_limit(index),
    }


def memory_allocated(device=None):
    """Bytes in live blocks (rounded to 512)."""
    return _stats(device).allocated_bytes


def max_memory_allocated(device=None):
    """At or above the peak of memory_allocated() since the start or the last reset_peak_memory_stats():
    blocks that threads keep for reuse count too (see allocated_bytes.all.peak above)."""
    return _stats(device).peak_allocated_bytes


def memory_reserved(device=None):
    """Bytes the pool holds from the device."""
    return _stats(device).reserved_bytes


def max_memory_reserved(device=None):
    """The peak of memory_reserved() since the start or the last reset_peak_memory_stats()."""
    return _stats(device).peak_reserved_bytes


def reset_peak_memory_stats(device=None):
    """Sets the peaks to the current figures."""
    _library.check(_library.load().vram_reset_peak_stats(_index(device)))


def empty_cache(device=None):
    """Gives the device every byte the pool holds that no live block uses; returns the bytes given back."""
    released = _ctypes.c_size_t(0)
    _library.check(_library.load().vram_trim(_index(device), _ctypes.byref(released)))
    return released.value


def set_memory_limit(limit_bytes, device=None):
    """The most bytes the device's pool may hold (0: no limit). Memory held above a lower limit stays until
    freed; allocations that would pass it fail."""
    if isinstance(limit_bytes, bool):
        raise TypeError(f"limit {limit_bytes!r}: want a whole number of bytes")
    try:
        limit = _operator.index(limit_bytes)  # an int or numpy integer; not 1.5, not "1GiB"
    except TypeError:
        raise TypeError(f"limit {limit_bytes!r}: want a whole number of bytes") from None
    if not 0 <= limit < 2**64:
        raise ValueError(f"limit {limit}: bytes, from 0 (no limit) to 2**64 - 1")
    _library.check(_library.load().vram_set_limit(_index(device), limit))


def get_memory_limit(device=None):
    """The device pool's limit in bytes (0: none)."""
    value = _ctypes.c_size_t(0)
    _library.check(_library.load().vram_get_limit(_index(device), _ctypes.byref(value)))
    return value.value


def device_count():
    """The number of device indices: the CUDA devices the process sees, or 8 simulated devices."""
    n = _library.load().vram_device_count()
    if n < 0:
        _library.fail("vram_device_count")
    return n


def device_name(device=None):
    """The device's description, e.g. 'NVIDIA H200 (cuda:0, 143771 MiB, 2 MiB granules)'."""
    name = _library.load().vram_device_name(_index(device))
    if name is None:
        _library.fail("vram_device_name")
    return name.decode()


def memory_snapshot(device=None):
    """The pool's snapshot as a dict: address range, handles, free ranges and blocks (docs/pool.md)."""
    lib = _library.load()
    text = lib.vram_snapshot_json(_index(device))
    if not text:
        _library.fail("vram_snapshot_json")
    try:
        return _json.loads(_ctypes.string_at(text).decode())
    finally:
        lib.vram_free_string(text)


def _path(path):
    """A path (str, bytes or os.PathLike) as the bytes the C API takes; TypeError for anything else (None
    included), ValueError for one holding a NUL, which C would cut short."""
    try:
        data = _os.fsencode(path)
    except TypeError:
        raise TypeError(f"path {path!r}: want a str, bytes or os.PathLike") from None
    if b"\0" in data:
        raise ValueError(f"path {path!r} holds a NUL character")
    return data


def record_start(path):
    """Writes every allocation and free that reaches libvram.so to a trace in vram's format at `path` (str,
    bytes or os.PathLike; device N > 0 to path with '.devN' before its extension) until record_stop() or
    exit."""
    _library.check(_library.load().vram_record_start(_path(path)))


def record_stop():
    """Flushes and closes the recording; nothing when none is under way."""
    _library.check(_library.load().vram_record_stop())


def library_path():
    """The path of the libvram.so in use (loading it first)."""
    return _library.path()


def format_bytes(n):
    """Bytes as vram's tools print them: '1000 B', '3.00 MiB'."""
    if n < 1024:
        return f"{n} B"
    for unit, size in (("KiB", 1 << 10), ("MiB", 1 << 20)):
        if n < size << 10:
            return f"{n / size:.2f} {unit}"
    return f"{n / (1 << 30):.2f} GiB"


def memory_summary(device=None):
    """The pool's figures as a small table for people."""
    index = _index(device)
    s = _stats(index)
    limit = get_memory_limit(index)
    rows = [
        ("allocated", format_bytes(s.allocated_bytes), format_bytes(s.peak_allocated_bytes)),
        ("reserved", format_bytes(s.reserved_bytes), format_bytes(s.peak_reserved_bytes)),
        ("requested", format_bytes(s.requested_bytes), "-"),
        ("cached", format_bytes(s.cached_bytes), "-"),
    ]
    lines = [
        f"vram, device {index}: {device_name(index)}",
        f"limit: {format_bytes(limit) if limit else 'none'}",
        f"{'':<10}{'current':>12}{'peak':>12}",
    ]
    lines += [f"{name:<10}{now:>12}{peak:>12}" for name, now, peak in rows]
    lines.append(f"blocks: {s.allocations - s.frees} live, {s.allocations} allocated, {s.frees} freed, "
                 f"{s.failed_allocations} refused for lack of memory, {s.alloc_retries} retried after recycling")
    lines.append(f"device calls: {s.handles_created} handles created, {s.handles_released} released, "
                 f"{s.maps} maps, {s.unmaps} unmaps")
    return "\n".join(lines) + "\n"
