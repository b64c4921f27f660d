"""The pool's settings as vram.torch.enable() takes them: each value worked out by hand against the rules of
src/vram/pool/pool_options.cpp and src/vram/core/size.cpp (vram/_settings.py lists them), then each text given
to libvram.so itself, in its VRAM_* variable, for a pool made from it: the library takes the same ones and
refuses the others in the same words."""
import json
import os
import re
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

PACKAGE = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, PACKAGE)

import vram  # noqa: E402
from vram.torch import SETTINGS, settings_environment  # noqa: E402

SIZE = "(write e.g. 512, 64MiB, 80GiB)"
TIME = "(write e.g. 250us, 5ms, 1.5s)"
WINDOW = "want milliseconds from 0 to 3600000, or a time with its unit (10ms, 500us)"

# (setting, value, its variable's text where taken, else the reason it is refused)
TAKEN = [
    ("limit", "8GiB", "8GiB"),
    ("limit", "8 GiB", "8 GiB"),  # spaces before the unit
    ("limit", "1.5TB", "1.5TB"),  # 1.5e12 bytes
    ("limit", ".5K", ".5K"),  # 512 bytes
    ("limit", "1.", "1."),
    ("limit", 1 << 30, "1073741824"),
    ("limit", 0, "0"),
    ("burst_bytes", 1e9, "1000000000"),
    ("limit", "18446744073709549568", "18446744073709549568"),  # the largest double below 2**64
    ("max_cached_ratio", 0.1, "0.1"),
    ("max_cached_ratio", "1e-3", "1e-3"),
    ("reserve_ratio", "1000", "1000"),
    ("reserve_ratio", ".5", ".5"),
    ("reserve_ratio", "-0", "-0"),  # -0.0 is not below 0
    ("reserve_ratio", "4e-320", "4e-320"),  # a subnormal double, not 0
    ("block_handles", 8, "8"),
    ("block_handles", 8.0, "8"),
    ("block_handles", "0012", "0012"),
    ("block_handles", 1024, "1024"),
    ("aliasing", True, "1"),
    ("thread_cache", False, "0"),
    ("membarrier", "on", "on"),
    ("holes_below_peak", "false", "false"),
    ("aliasing", 1, "1"),
    ("burst_window", 2.5, "2.5"),  # milliseconds
    ("burst_window", "10ms", "10ms"),
    ("burst_window", "500us", "500us"),
    ("burst_window", "1s", "1s"),
    ("burst_window", "5.ms", "5.ms"),
    ("burst_window", "0.0000004ms", "0.0000004ms"),  # 0.4 ns: 0
    ("burst_window", "3600000", "3600000"),  # an hour
    ("burst_window", "3600000.0000004ms", "3600000.0000004ms"),  # 3600000000000.4 ns: an hour
]
REFUSED = [
    ("limit", "8gib", f"bad size '8gib': unknown unit 'gib' {SIZE}"),
    ("limit", "8T", f"bad size '8T': unknown unit 'T' {SIZE}"),
    ("limit", "1e3", f"bad size '1e3': unknown unit 'e3' {SIZE}"),
    ("limit", " 8GiB", f"bad size ' 8GiB': no number {SIZE}"),
    ("limit", -1, f"bad size '-1': negative {SIZE}"),
    ("max_handle", ".", f"bad size '.': not a number {SIZE}"),
    ("small_handle", "1..2", f"bad size '1..2': not a number {SIZE}"),
    ("spare_slack", "0.1", f"bad size '0.1': not a whole number of bytes {SIZE}"),
    ("limit", 1.5, f"bad size '1.5': not a whole number of bytes {SIZE}"),
    ("limit", "1.1MiB", f"bad size '1.1MiB': not a whole number of bytes {SIZE}"),  # 1153433.6
    ("limit", "18446744073709551615", f"bad size '18446744073709551615': too large {SIZE}"),  # 2**64 as a double
    ("thread_cache_bytes", 2**64, f"bad size '18446744073709551616': too large {SIZE}"),
    ("max_cached_ratio", "1000.5", "'1000.5' is out of range: want a number from 0 to 1000"),
    ("max_cached_ratio", -0.5, "'-0.5' is out of range: want a number from 0 to 1000"),
    ("max_cached_ratio", "+1", "'+1': want a number from 0 to 1000"),
    ("max_cached_ratio", " 1", "' 1': want a number from 0 to 1000"),
    ("max_cached_ratio", "1_0", "'1_0': want a number from 0 to 1000"),
    ("max_cached_ratio", "0x10", "'0x10': want a number from 0 to 1000"),
    ("reserve_ratio", float("nan"), "'nan': want a number from 0 to 1000"),
    ("reserve_ratio", "1e400", "'1e400': want a number from 0 to 1000"),  # past a double
    ("reserve_ratio", "1e-400", "'1e-400': want a number from 0 to 1000"),  # below a double's least
    ("block_handles", "1025", "'1025': want a whole number from 0 to 1024"),
    ("block_handles", "-0", "'-0': want a whole number from 0 to 1024"),
    ("block_handles", "1e2", "'1e2': want a whole number from 0 to 1024"),
    ("block_handles", 8.5, "'8.5': want a whole number from 0 to 1024"),
    ("block_handles", "\uff18", "'\uff18': want a whole number from 0 to 1024"),  # a full-width 8
    ("aliasing", "TRUE", "'TRUE': want 1 or 0"),
    ("thread_cache", "yes", "'yes': want 1 or 0"),
    ("membarrier", 2, "'2': want 1 or 0"),
    ("holes_below_peak", " 1", "' 1': want 1 or 0"),
    ("burst_window", "3600001", f"'3600001': {WINDOW}"),
    ("burst_window", "-1", f"'-1': {WINDOW}"),
    ("burst_window", "5us ", f"'5us ': {WINDOW}"),  # ends in no letter: a number of milliseconds
    ("burst_window", "3600000.0000005ms", "'3600000.0000005ms' is out of range: want at most 3600000 ms"),
    ("burst_window", "2h", f"bad duration '2h': unknown unit 'h' {TIME}"),
    ("burst_window", "1 ms", f"bad duration '1 ms': unknown unit ' ms' {TIME}"),
    ("burst_window", "1e3ms", f"bad duration '1e3ms': unknown unit 'e3ms' {TIME}"),
    ("burst_window", "-5ms", f"bad duration '-5ms': negative {TIME}"),
    ("burst_window", "1..2ms", f"bad duration '1..2ms': not a number {TIME}"),
    ("burst_window", float("inf"), f"bad duration 'inf': no number {TIME}"),
    ("burst_window", "9999999999999s", f"bad duration '9999999999999s': too long {TIME}"),  # 1e22 ns
    ("burst_window", "1" + "0" * 300 + "s", f"bad duration '1{'0' * 300}s': too long {TIME}"),  # past a double
]


def text_of(value):
    """The text a refused value was given as (as enable() writes it, before the check)."""
    return value if isinstance(value, str) else str(value)


class Values(unittest.TestCase):
    def test_values_the_library_takes_are_set_as_written(self):
        for name, value, text in TAKEN:
            self.assertEqual(settings_environment({name: value}), {SETTINGS[name]: text}, (name, value))

    def test_values_the_library_refuses_are_refused_in_its_words(self):
        for name, value, why in REFUSED:
            with self.assertRaises(ValueError, msg=(name, value)) as caught:
                settings_environment({name: value})
            self.assertEqual(str(caught.exception), f"vram setting {name}: {why}")

    def test_an_empty_string_is_no_value(self):
        # The library reads an empty variable as unset; as a setting it is no size.
        with self.assertRaises(ValueError) as caught:
            settings_environment({"limit": ""})
        self.assertEqual(str(caught.exception), f"vram setting limit: bad size '': no number {SIZE}")

    def test_a_bool_is_for_flags_only(self):
        for name in ("limit", "max_cached_ratio", "block_handles", "burst_window"):
            with self.assertRaises(TypeError) as caught:
                settings_environment({name: True})
            self.assertEqual(str(caught.exception), f"vram setting {name}=True: a bool is for a flag "
                                                     "(holes_below_peak, aliasing, thread_cache, membarrier)")

    def test_every_setting_of_the_library_s_table_is_known(self):
        source = Path(PACKAGE).parent / "src" / "vram" / "pool" / "pool_options.cpp"
        if not source.exists():
            self.skipTest("no source tree beside the package")
        rows = re.findall(r'\{"(\w+)", "(VRAM_\w+)"', source.read_text())
        self.assertEqual(sorted(rows), sorted(SETTINGS.items()))


LIBRARY_VERDICTS = textwrap.dedent("""
    import json, os, sys
    from vram import _library
    lib = _library.load()
    out = []
    for device, (variable, text) in enumerate(json.loads(sys.argv[1])):
        os.environ[variable] = text  # read when the device's pool is made, at its first call
        out.append(None if lib.vram_device_name(device) else _library.last_error())
        del os.environ[variable]
    print(json.dumps(out))
    """)


class TheLibraryAgrees(unittest.TestCase):
    def verdicts(self, cases):
        """libvram.so's message for each (variable, text), None where it made the pool: eight to a Python,
        one to each simulated device."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("VRAM_") or k == "VRAM_LIBRARY"}
        env.update(PYTHONPATH=PACKAGE, VRAM_DEVICE="sim:64MiB", VRAM_LIBRARY=vram.library_path())
        out = []
        for i in range(0, len(cases), 8):
            r = subprocess.run([sys.executable, "-c", LIBRARY_VERDICTS, json.dumps(cases[i:i + 8])], env=env,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            out += json.loads(r.stdout)
        return out

    def test_it_takes_the_values_taken_here(self):
        cases = [(SETTINGS[name], text) for name, _, text in TAKEN]
        self.assertEqual(self.verdicts(cases), [None] * len(cases))

    def test_it_refuses_the_values_refused_here_in_the_same_words(self):
        cases = [(SETTINGS[name], text_of(value)) for name, value, _ in REFUSED]
        expected = [f"vram_device_name(device={i % 8}): environment variable {SETTINGS[name]}: {why}"
                    for i, (name, _, why) in enumerate(REFUSED)]
        self.assertEqual(self.verdicts(cases), expected)


if __name__ == "__main__":
    unittest.main()
