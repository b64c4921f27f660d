"""The pool's settings (src/vram/pool/pool_options.hpp), their VRAM_* variables, and what values they take.

libvram.so reads the variables only when it makes a device's pool, at the first call on that device, and
has no call that checks a value before: a bad one would fail every call there. text() refuses it at once,
by the rules of src/vram/pool/pool_options.cpp and src/vram/core/size.cpp, in the library's words:
  - a size: a number of digits and points, then spaces and a unit of B, K, KiB, KB, M, MiB, MB, G, GiB, GB,
    TiB, TB (none: bytes), a whole number of bytes below 2**64 ("8GiB", "1.5 GiB", "512");
  - a ratio: a number as C++'s std::from_chars reads it (optional minus, digits, point, exponent), from 0
    to 1000;
  - a count: digits only, from 0 to 1024;
  - a flag: 1, true, on, 0, false or off;
  - a window: milliseconds from 0 to an hour, as a number ("2.5") or, where it ends in a letter, a time
    with its unit ns, us, ms or s ("500us").
"""
import math
import re
import string

_MAX_RATIO = 1000  # pool_options.cpp's max_ratio, max_block_handles and max_window_ms
_MAX_COUNT = 1024
_MAX_WINDOW_MS = 3_600_000

_SIZE_UNITS = {"": 1.0, "B": 1.0, "K": 1024.0, "KiB": 1024.0, "KB": 1e3, "M": 1048576.0, "MiB": 1048576.0,
               "MB": 1e6, "G": 1073741824.0, "GiB": 1073741824.0, "GB": 1e9, "TiB": 1099511627776.0,
               "TB": 1e12}
_TIME_UNITS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}

# What std::from_chars takes as a whole double. "inf" and "nan" parse too, but the library refuses them as
# not finite, so they are left out here.
_NUMBER = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
_LEADING = re.compile(r"[0-9.]*")


def _from_chars(text):
    """The double std::from_chars reads from the whole of text, or None where it refuses it: a malformed
    text, or one out of a double's range (to infinity, or to 0 from digits that are not all 0)."""
    match = _NUMBER.fullmatch(text)
    if not match:
        return None
    value = float(text)
    if math.isinf(value) or (value == 0 and re.search("[1-9]", match.group(1))):
        return None
    return value


def _leading_number(text, bad):
    """The number a size or a time starts with, and the text after it (core/size.cpp's leading_number)."""
    digits = _LEADING.match(text).group()
    if not digits:
        raise bad("negative" if text.startswith("-") else "no number")
    value = _from_chars(digits)
    if value is None:
        raise bad("not a number")
    return value, text[len(digits):]


def _size(text):
    def bad(why):
        return ValueError(f"bad size '{text}': {why} (write e.g. 512, 64MiB, 80GiB)")
    value, unit = _leading_number(text, bad)
    unit = unit.lstrip(" ")
    if unit not in _SIZE_UNITS:
        raise bad(f"unknown unit '{unit}'")
    size = value * _SIZE_UNITS[unit]
    if not size < 2.0**64:
        raise bad("too large")
    if size != math.floor(size):
        raise bad("not a whole number of bytes")


def _ratio(text):
    value = _from_chars(text)
    if value is None:
        raise ValueError(f"'{text}': want a number from 0 to {_MAX_RATIO}")
    if not 0 <= value <= _MAX_RATIO:
        raise ValueError(f"'{text}' is out of range: want a number from 0 to {_MAX_RATIO}")


def _count(text):
    if not re.fullmatch("[0-9]+", text) or int(text) > _MAX_COUNT:
        raise ValueError(f"'{text}': want a whole number from 0 to {_MAX_COUNT}")


def _flag(text):
    if text not in ("1", "true", "on", "0", "false", "off"):
        raise ValueError(f"'{text}': want 1 or 0")


def _window(text):
    if not text or text[-1] not in string.ascii_letters:  # std::isalpha of its last byte
        value = _from_chars(text)
        if value is None or not 0 <= value <= _MAX_WINDOW_MS:
            raise ValueError(f"'{text}': want milliseconds from 0 to {_MAX_WINDOW_MS}, or a time with its unit "
                             "(10ms, 500us)")
        return

    def bad(why):
        return ValueError(f"bad duration '{text}': {why} (write e.g. 250us, 5ms, 1.5s)")
    value, unit = _leading_number(text, bad)
    if unit not in _TIME_UNITS:
        raise bad("no unit" if not unit else f"unknown unit '{unit}'")
    ns = value * _TIME_UNITS[unit]
    if not ns < 2.0**63:  # before rounding, which does not change a double that large
        raise bad("too long")
    ns = math.floor(ns) + (ns - math.floor(ns) >= 0.5)  # std::round: halves away from 0
    if ns / 1e6 > _MAX_WINDOW_MS:
        raise ValueError(f"'{text}' is out of range: want at most {_MAX_WINDOW_MS} ms")


# name: (variable, check), in the order enable() lists them.
SETTINGS = {
    "limit": ("VRAM_LIMIT", _size),
    "max_cached_ratio": ("VRAM_MAX_CACHED_RATIO", _ratio),
    "max_handle": ("VRAM_MAX_HANDLE", _size),
    "small_handle": ("VRAM_SMALL_HANDLE", _size),
    "block_handles": ("VRAM_BLOCK_HANDLES", _count),
    "burst_bytes": ("VRAM_BURST_BYTES", _size),
    "burst_window": ("VRAM_BURST_WINDOW", _window),
    "spare_slack": ("VRAM_SPARE_SLACK", _size),
    "holes_below_peak": ("VRAM_HOLES_BELOW_PEAK", _flag),
    "aliasing": ("VRAM_ALIASING", _flag),
    "reserve_ratio": ("VRAM_RESERVE_RATIO", _ratio),
    "thread_cache": ("VRAM_THREAD_CACHE", _flag),
    "thread_cache_bytes": ("VRAM_THREAD_CACHE_BYTES", _size),
    "membarrier": ("VRAM_MEMBARRIER", _flag),
}


def text(name, value):
    """The text of a setting's variable: bools as "1" / "0", numbers in decimal, strings as they are ("8GiB").
    TypeError for an unknown name, a value of another type, or a bool for a setting that is no flag;
    ValueError naming the setting for a value the library would refuse."""
    if name not in SETTINGS:
        raise TypeError(f"unknown vram setting {name!r}; the settings: {', '.join(SETTINGS)}")
    _, check = SETTINGS[name]
    if isinstance(value, bool):
        if check is not _flag:
            raise TypeError(f"vram setting {name}={value!r}: a bool is for a flag (holes_below_peak, aliasing, "
                            "thread_cache, membarrier)")
        written = "1" if value else "0"
    elif isinstance(value, float) and value.is_integer():
        written = str(int(value))  # 1e9 bytes -> "1000000000", which sizes accept
    elif isinstance(value, (int, float, str)):
        written = str(value)
    else:
        raise TypeError(f"vram setting {name}={value!r}: want an int, a float, a bool or a string")
    try:
        check(written)
    except ValueError as e:
        raise ValueError(f"vram setting {name}: {e}") from None
    return written
