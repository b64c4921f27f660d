"""vram's pool under every CUDA tensor of a PyTorch program: `vram.torch.enable()`, before CUDA starts.

enable() loads libvram.so (vram._library), gives PyTorch its allocation functions through
torch.cuda.memory.CUDAPluggableAllocator and change_current_allocator, and refuses CUDA graph capture
(below). The functions come from libvram_torch.so where it was built beside libvram.so (it turns an
out-of-memory into torch.OutOfMemoryError with vram's message); else from libvram.so itself, whose NULL on
an out-of-memory PyTorch does not check.

CUDA graphs: torch.cuda.graph gives the graph's memory a private pool through allocator hooks that
PyTorch's Python API does not let a pluggable allocator set, so under vram memory a captured graph still
uses could be handed to other work after capture. enable() makes CUDAGraph.capture_begin raise VramError
saying so, rather than let a graph replay over another tensor's memory.

This module imports torch only inside its functions.
"""
import os
import warnings
from pathlib import Path

from ._library import VramError
from . import _library

# The pool's settings and their variables (src/vram/pool/pool_options.hpp).
SETTINGS = {
    "limit": "VRAM_LIMIT",
    "max_cached_ratio": "VRAM_MAX_CACHED_RATIO",
    "max_handle": "VRAM_MAX_HANDLE",
    "small_handle": "VRAM_SMALL_HANDLE",
    "burst_bytes": "VRAM_BURST_BYTES",
    "burst_window": "VRAM_BURST_WINDOW",
    "aliasing": "VRAM_ALIASING",
    "reserve_ratio": "VRAM_RESERVE_RATIO",
    "thread_cache": "VRAM_THREAD_CACHE",
    "thread_cache_bytes": "VRAM_THREAD_CACHE_BYTES",
    "membarrier": "VRAM_MEMBARRIER",
}

_state = None  # what enable() did: {"settings", "library", "functions", "record"}


def _torch():
    try:
        import torch
    except ImportError as e:
        raise VramError(f"vram.torch needs PyTorch, which cannot be imported here: {e}") from e
    return torch


def settings_environment(settings):
    """The VRAM_* variables for pool settings given by name. TypeError for an unknown name."""
    env = {}
    for name, value in settings.items():
        if name not in SETTINGS:
            raise TypeError(f"unknown vram setting {name!r}; the settings: {', '.join(SETTINGS)}")
        if isinstance(value, bool):
            text = "1" if value else "0"
        else:
            text = str(value)
        env[SETTINGS[name]] = text
    return env


def _allocator_library():
    """(path, malloc name, free name) for PyTorch: the shim where it exists, else libvram.so."""
    named = os.environ.get("VRAM_TORCH_LIBRARY")
    shim = Path(named) if named else Path(_library.path()).resolve().parent / "libvram_torch.so"
    if shim.is_file():
        return str(shim), "vram_torch_malloc", "vram_torch_free"
    if named:
        raise VramError(f"VRAM_TORCH_LIBRARY={named}: no such file")
    warnings.warn(f"vram: {shim} was not found (it is built where python3 imports torch), so an out-of-memory "
                  "inside PyTorch gives a tensor with a NULL pointer rather than torch.OutOfMemoryError; read "
                  "vram.memory_stats()['num_ooms'] and vram._library.last_error()", RuntimeWarning, stacklevel=3)
    return _library.path(), "vram_malloc", "vram_free"


def _refuse_capture(self, *args, **kwargs):
    raise VramError(
        "CUDA graph capture is not supported under vram's pool: PyTorch gives a captured graph's memory a private "
        "pool through allocator hooks that a pluggable allocator cannot set from Python, so memory the graph "
        "uses could be handed to other tensors while the graph lives. Run graphed code (torch.cuda.graph, "
        "make_graphed_callables, torch.compile(mode='reduce-overhead')) in a process that uses PyTorch's own "
        "allocator.", _library.ERROR_INVALID_ARGUMENT)


def enable(record=None, **settings):
    """Puts every CUDA tensor of the process in vram's pool. Call before CUDA is initialised.

    settings: the pool's settings by name (limit, max_cached_ratio, max_handle, small_handle, burst_bytes,
    burst_window, aliasing, reserve_ratio, thread_cache, thread_cache_bytes, membarrier), as ints, floats,
    bools or strings such as "8GiB"; they apply to each device's pool when it is made.
    record: a path; every allocation and free is written there as a trace (vram.record_start).
    A second call with the same arguments does nothing; with others it raises VramError.
    """
    global _state
    wanted = {"settings": dict(settings), "record": None if record is None else str(record)}
    if _state is not None:
        if {k: _state[k] for k in wanted} != wanted:
            raise VramError(f"vram.torch.enable() was already called with {_state['settings']} "
                            f"(record={_state['record']}); the pool's settings cannot change in a running process")
        return _state
    env = settings_environment(settings)
    torch = _torch()
    if torch.cuda.is_initialized():
        raise VramError("vram.torch.enable() must come before CUDA is initialised (before the first CUDA tensor "
                        "or torch.cuda call that starts CUDA): PyTorch cannot change the allocator of a running "
                        "CUDA context. Call it first thing in the program, and restart the process.")
    if env and _library._lib is not None:
        warnings.warn("vram: libvram.so was used before enable(): its settings reach only the devices whose pool "
                      "is not made yet", RuntimeWarning, stacklevel=2)
    os.environ.update(env)
    _library.load()
    path, malloc_name, free_name = _allocator_library()
    allocator = torch.cuda.memory.CUDAPluggableAllocator(path, malloc_name, free_name)
    torch.cuda.memory.change_current_allocator(allocator)
    if record is not None:
        from . import record_start
        record_start(record)
    graph = torch.cuda.CUDAGraph
    if getattr(graph.capture_begin, "__name__", "") != _refuse_capture.__name__:
        graph._vram_original_capture_begin = graph.capture_begin
        graph.capture_begin = _refuse_capture
    _state = dict(wanted, library=path, functions=(malloc_name, free_name), allocator=allocator)
    return _state


def enabled():
    """True once enable() has put PyTorch's tensors in vram's pool."""
    return _state is not None


def memory_stats(device=None):
    """vram.memory_stats for a torch device (None: the current one)."""
    from . import memory_stats as stats
    return stats(device)


def memory_summary(device=None):
    """vram.memory_summary for a torch device (None: the current one)."""
    from . import memory_summary as summary
    return summary(device)


def empty_cache(device=None):
    """vram.empty_cache: torch.cuda.empty_cache() does not reach a pluggable allocator."""
    from . import empty_cache as trim
    return trim(device)

