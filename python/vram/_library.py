"""Finding and loading libvram.so, the prototypes of its C API (include/vram/vram.h), and its errors.

The library is the file the environment variable VRAM_LIBRARY names, when it is set (and only that one: a
library the user named is never replaced by another silently); otherwise libvram.so beside this package's own
files, then <repo>/build/libvram.so when the package is used from the source tree (python/vram/ beside the
repository's include/vram/vram.h). None found is a VramError naming every place looked. The library is loaded
once, with ctypes.CDLL (dlopen): PyTorch opening the same path later gets the same library, so both see the
same pools.

load() gives the ctypes handle, with argtypes and restype set for every function of vram.h; malloc() and
free() call vram_malloc / vram_free and raise the library's error, for tests and scripts.
"""
import ctypes
import operator
import os
import threading
from pathlib import Path

_HERE = Path(__file__).resolve().parent

# Status codes of vram.h.
SUCCESS = 0
ERROR_OUT_OF_MEMORY = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_DEVICE = 3
ERROR_INTERNAL = 4


class VramError(RuntimeError):
    """A call into libvram.so failed, or the library cannot be found or used. `code` is vram.h's status."""

    __module__ = "vram"  # where programs find it, and tracebacks name it

    def __init__(self, message, code=ERROR_INTERNAL):
        super().__init__(message)
        self.code = code


class OutOfMemoryError(VramError, MemoryError):
    """The pool could not serve a request: the message says what was asked and what the pool holds."""

    __module__ = "vram"


class Stats(ctypes.Structure):
    """vram_stats of vram.h, version 2 (VRAM_STATS_VERSION), read with vram_get_stats_sized: a library of another
    version writes this structure's bytes and no more."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "requested_bytes", "allocated_bytes", "peak_allocated_bytes", "reserved_bytes", "peak_reserved_bytes",
        "cached_bytes", "thread_cached_bytes", "pending_bytes", "mapped_bytes")] + \
        [(name, ctypes.c_uint64) for name in (
            "allocations", "frees", "failed_allocations", "alloc_retries", "handles_created", "handles_released",
            "maps", "unmaps")]


def candidates():
    """The paths looked at for libvram.so, in order, each with where it came from. VRAM_LIBRARY, when set,
    is the only one: a library the user named is never replaced by another silently."""
    env = os.environ.get("VRAM_LIBRARY")
    if env:
        return [(Path(env), "VRAM_LIBRARY")]
    found = [(_HERE / "libvram.so", "beside the package")]
    repo = _HERE.parent.parent
    if (repo / "include" / "vram" / "vram.h").is_file():
        found.append((repo / "build" / "libvram.so", "the source tree's build folder"))
    return found


def _prototypes(lib):
    c = ctypes
    table = {
        "vram_malloc": (c.c_void_p, [c.c_ssize_t, c.c_int, c.c_void_p]),
        "vram_free": (None, [c.c_void_p, c.c_ssize_t, c.c_int, c.c_void_p]),
        "vram_record_stream": (c.c_int, [c.c_void_p, c.c_int, c.c_void_p]),
        "vram_trim": (c.c_int, [c.c_int, c.POINTER(c.c_size_t)]),
        "vram_set_limit": (c.c_int, [c.c_int, c.c_size_t]),
        "vram_get_limit": (c.c_int, [c.c_int, c.POINTER(c.c_size_t)]),
        "vram_get_stats_sized": (c.c_int, [c.c_int, c.c_void_p, c.c_size_t]),
        "vram_reset_peak_stats": (c.c_int, [c.c_int]),
        "vram_record_start": (c.c_int, [c.c_char_p]),
        "vram_record_stop": (c.c_int, []),
        "vram_snapshot_json": (c.c_void_p, [c.c_int]),  # a char* to give back: not c_char_p, which copies
        "vram_free_string": (None, [c.c_void_p]),
        "vram_device_count": (c.c_int, []),
        "vram_device_name": (c.c_char_p, [c.c_int]),
        "vram_last_error_code": (c.c_int, []),
        "vram_last_error": (c.c_char_p, []),
    }
    missing = [name for name in table if not hasattr(lib, name)]
    if len(missing) == len(table):
        raise VramError(f"{lib._name}: not vram's C library (it has none of vram_malloc, vram_free, ...); "
                        f"point VRAM_LIBRARY at libvram.so (cmake --build build --target vram_c)")
    if missing:
        raise VramError(f"{lib._name}: an older libvram.so, without {', '.join(missing)}; rebuild it "
                        f"(cmake --build build --target vram_c)")
    for name, (restype, argtypes) in table.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


_lock = threading.Lock()
_lib = None
_path = None


def load():
    """The loaded library (loading it on first use). Raises VramError naming every place looked."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path, origin in candidates():
            if path.is_dir():
                tried.append(f"{path} ({origin}): a folder, not a file")
                continue
            if not path.is_file():
                tried.append(f"{path} ({origin}): no such file")
                continue
            full = os.path.abspath(path)  # the same file for PyTorch whatever the working directory then
            try:
                lib = ctypes.CDLL(full)
            except OSError as e:
                tried.append(f"{path} ({origin}): {e}")
                continue
            _prototypes(lib)
            _lib, _path = lib, full
            return _lib
        raise VramError("libvram.so could not be loaded; looked at:\n  " + "\n  ".join(tried) +
                        "\nBuild it (cmake --build build --target vram_c) and set VRAM_LIBRARY to its path.",
                        ERROR_DEVICE)


def path():
    """The absolute path of the loaded library (loading it first); symbolic links are left as they are."""
    load()
    return _path


def last_error():
    """This thread's latest failure message from the library."""
    message = load().vram_last_error()
    return message.decode(errors="replace") if message else ""


def check(status):
    """Raises the error for a non-zero status of the call just made on this thread."""
    if status == SUCCESS:
        return
    error = OutOfMemoryError if status == ERROR_OUT_OF_MEMORY else VramError
    raise error(last_error(), status)


def fail(call):
    """Raises the error of a call that reported failure through its result (NULL, -1): its status, or an
    internal error should the status read 0."""
    check(load().vram_last_error_code())
    raise VramError(f"{call} failed without a status", ERROR_INTERNAL)


def _whole(value, what):
    """value as an int (an int or numpy integer; not a bool, 1.5 or "1GiB"), else TypeError."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{what} {value!r}: want a whole number")


def device_index(device):
    """A device index as the C API takes it (an int), checked here: ctypes would wrap a larger one."""
    index = _whole(device, "device")
    if not 0 <= index < 2**31:
        raise ValueError(f"device {index} is out of range: want an index from 0 to vram.device_count() - 1")
    return index


def size_bytes(size):
    """A size as vram_malloc and vram_free take it (an ssize_t), checked here: ctypes would wrap a larger one."""
    n = _whole(size, "size")
    if not 0 <= n < 2**63:
        raise ValueError(f"size {n} is out of range: want bytes from 0 to 2**63 - 1")
    return n


def address(value, what):
    """A pointer or a stream as the C API takes it (a void*: None or an int below 2**64), checked here."""
    if value is None:
        return None
    n = _whole(value, what)
    if not 0 <= n < 2**64:
        raise ValueError(f"{what} {n} is out of range: want an address from 0 to 2**64 - 1")
    return n


def malloc(size, device=0, stream=None):
    """vram_malloc: the block's address as an int (None for size 0). Raises OutOfMemoryError or VramError;
    TypeError or ValueError for a size, device or stream the C API cannot take."""
    size = size_bytes(size)
    ptr = load().vram_malloc(size, device_index(device), address(stream, "stream"))
    if ptr is None and size != 0:
        fail("vram_malloc")
    return ptr


def free(ptr, size, device=0, stream=None):
    """vram_free, with size, device and stream as given to malloc(). Raises VramError for a bad free;
    TypeError or ValueError for a pointer, size, device or stream the C API cannot take."""
    load().vram_free(address(ptr, "pointer"), size_bytes(size), device_index(device), address(stream, "stream"))
    check(load().vram_last_error_code())
