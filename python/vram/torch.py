"""vram's pool under every CUDA tensor of a PyTorch program: `vram.torch.enable()`, before CUDA starts.

enable() loads libvram.so (vram._library), gives PyTorch its allocation functions through
torch.cuda.memory.CUDAPluggableAllocator and change_current_allocator, and refuses CUDA graph capture
(below). The functions are vram_torch_malloc / vram_torch_free from libvram_torch.so (the file
VRAM_TORCH_LIBRARY names, else the one beside libvram.so where the build made it), which turn an
out-of-memory into torch.OutOfMemoryError with vram's message; else vram_malloc / vram_free from libvram.so
itself, whose NULL on an out-of-memory PyTorch does not check (enable() warns once).

CUDA graphs: torch.cuda.graph gives the graph's memory a private pool through allocator hooks that
PyTorch's Python API does not let a pluggable allocator set, so under vram memory a captured graph still
uses could be handed to other work after capture. enable() makes CUDAGraph.capture_begin (and
torch.cuda.graph's __enter__, before it switches streams) raise VramError saying so, rather than let a graph
replay over another tensor's memory; the originals stay as CUDAGraph._vram_original_capture_begin and
torch.cuda.graph._vram_original_enter.

memory_stats, memory_summary, empty_cache and the other memory functions are the package's own, here too
for code that reads `vram.torch.memory_stats()` beside `torch.cuda.memory_stats()`.

This module imports torch only inside its functions.
"""
import os
import warnings
from pathlib import Path

from ._library import VramError
from . import _library, _path, _settings
# torch.cuda's memory functions do not reach a pluggable allocator: vram's own, under the same names, whose
# device defaults to torch's current one once CUDA has started.
from . import (empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated,  # noqa: F401
               memory_reserved, memory_snapshot, memory_stats, memory_summary, reset_peak_memory_stats)

# The pool's settings and their variables (src/vram/pool/pool_options.hpp).
SETTINGS = {name: variable for name, (variable, _) in _settings.SETTINGS.items()}

_state = None  # what enable() did: {"settings", "record", "library", "functions", "allocator"}


def _torch():
    try:
        import torch
    except ImportError as e:
        raise VramError(f"vram.torch needs PyTorch, which cannot be imported here: {e}",
                        _library.ERROR_INVALID_ARGUMENT) from e
    return torch


def settings_environment(settings):
    """The VRAM_* variables for pool settings given by name: bools as "1" / "0", numbers in decimal, strings
    as they are ("8GiB"). TypeError for an unknown name or a value of another type; ValueError naming the
    setting for a value the library would refuse (vram._settings says which it takes)."""
    env = {}
    for name, value in settings.items():
        text = _settings.text(name, value)  # before SETTINGS[name]: an unknown name is a TypeError
        env[SETTINGS[name]] = text
    return env


def _allocator_library():
    """(path, malloc name, free name) for PyTorch: the shim where it exists, else libvram.so."""
    named = os.environ.get("VRAM_TORCH_LIBRARY")
    if named:
        if not Path(named).is_file():
            raise VramError(f"VRAM_TORCH_LIBRARY={named}: no such file", _library.ERROR_INVALID_ARGUMENT)
        return named, "vram_torch_malloc", "vram_torch_free"
    loaded = Path(_library.path())
    places = [loaded.parent / "libvram_torch.so", loaded.resolve().parent / "libvram_torch.so"]
    for shim in places:
        if shim.is_file():
            return str(shim), "vram_torch_malloc", "vram_torch_free"
    shim = places[0]
    warnings.warn(f"vram: {shim} was not found (it is built where python3 imports torch), so an out-of-memory "
                  "inside PyTorch gives a tensor with a NULL pointer rather than torch.OutOfMemoryError; read "
                  "vram.memory_stats()['num_ooms'] and vram._library.last_error()", RuntimeWarning, stacklevel=3)
    return _library.path(), "vram_malloc", "vram_free"


def _refuse_capture(self, *args, **kwargs):
    """Stands for CUDAGraph.capture_begin and torch.cuda.graph.__enter__ once enable() has run."""
    raise VramError(
        "CUDA graph capture is not supported under vram's pool: PyTorch gives a captured graph's memory a private "
        "pool through allocator hooks that a pluggable allocator cannot set from Python, so memory the graph "
        "uses could be handed to other tensors while the graph lives. Run graphed code (torch.cuda.graph, "
        "make_graphed_callables, torch.compile(mode='reduce-overhead')) in a process that uses PyTorch's own "
        "allocator.", _library.ERROR_INVALID_ARGUMENT)


def _refuse(cls, name):
    """Puts _refuse_capture in place of cls.name, keeping the original as cls._vram_original_<name>."""
    if getattr(cls, name) is not _refuse_capture:
        setattr(cls, "_vram_original_" + name.strip("_"), getattr(cls, name))
        setattr(cls, name, _refuse_capture)


def enable(record=None, **settings):
    """Puts every CUDA tensor of the process in vram's pool. Call before CUDA is initialised.

    settings: the pool's settings by name (limit, max_cached_ratio, max_handle, small_handle, block_handles,
    burst_bytes, burst_window, spare_slack, holes_below_peak, aliasing, reserve_ratio, thread_cache,
    thread_cache_bytes, membarrier), as ints, floats,
    bools or strings such as "8GiB"; they are set as their VRAM_* variables and apply to each device's pool
    when it is made. An unknown name is a TypeError listing the known ones; a value the library would refuse
    is a ValueError naming the setting and the value, before anything is changed.
    record: a path (str, bytes or os.PathLike); every allocation and free is written there as a trace
    (vram.record_start).
    Returns a dict of what was done: settings, record, library, functions (the two names), allocator.
    A second call with the same arguments returns the same dict; with others it raises VramError, as it does
    once CUDA is initialised, without PyTorch, and for a VRAM_TORCH_LIBRARY that names no file.
    """
    global _state
    wanted = {"settings": dict(settings), "record": None if record is None else os.fsdecode(_path(record))}
    if _state is not None:
        if {k: _state[k] for k in wanted} != wanted:
            raise VramError(f"vram.torch.enable() was already called with {_state['settings']} "
                            f"(record={_state['record']}); the pool's settings cannot change in a running process",
                            _library.ERROR_INVALID_ARGUMENT)
        return _state
    env = settings_environment(settings)
    torch = _torch()
    if torch.cuda.is_initialized():
        raise VramError("vram.torch.enable() must come before CUDA is initialised (before the first CUDA tensor "
                        "or torch.cuda call that starts CUDA): PyTorch cannot change the allocator of a running "
                        "CUDA context. Call it first thing in the program, and restart the process.",
                        _library.ERROR_INVALID_ARGUMENT)
    if env and _library._lib is not None:
        warnings.warn("vram: libvram.so was used before enable(): its settings reach only the devices whose pool "
                      "is not made yet", RuntimeWarning, stacklevel=2)
    os.environ.update(env)
    _library.load()
    path, malloc_name, free_name = _allocator_library()
    if record is not None:
        from . import record_start
        record_start(record)
    try:
        allocator = torch.cuda.memory.CUDAPluggableAllocator(path, malloc_name, free_name)
        torch.cuda.memory.change_current_allocator(allocator)
    except BaseException:
        if record is not None:
            from . import record_stop
            record_stop()
        raise
    _refuse(torch.cuda.CUDAGraph, "capture_begin")
    if isinstance(getattr(torch.cuda, "graph", None), type):
        _refuse(torch.cuda.graph, "__enter__")  # before it enters its capture stream, which would stay current
    _state = dict(wanted, library=path, functions=(malloc_name, free_name), allocator=allocator)
    return _state


def enabled():
    """True once enable() has put PyTorch's tensors in vram's pool."""
    return _state is not None


