"""The vram package over libvram.so on simulated devices of 64 MiB (VRAM_DEVICE=sim:64MiB, set by the test
command) with threads' caches off, so every figure follows from the calls alone. Pools live as long as the
process, so each test that needs absolute figures takes a device of its own (0 to 7).

Sizes round up to 512 bytes (1000 -> 1024). A block of up to 64 KiB lives in the tiny zone's 2 MiB handle; a
3 MiB block takes two 2 MiB handles of the large zone: 6 MiB reserved for the two.
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

os.environ.setdefault("VRAM_DEVICE", "sim:64MiB")
os.environ["VRAM_THREAD_CACHE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import vram  # noqa: E402
from vram import _library  # noqa: E402

MiB = 1 << 20


def malloc(size, device, stream=None):
    return _library.load().vram_malloc(size, device, stream)


def free(ptr, size, device, stream=None):
    _library.load().vram_free(ptr, size, device, stream)
    _library.check(_library.load().vram_last_error_code())


class Statistics(unittest.TestCase):
    def test_figures_follow_the_calls_on_device_2(self):
        small = malloc(1000, 2)
        big = malloc(3 * MiB, 2)
        self.assertTrue(small and big)
        s = vram.memory_stats(2)
        self.assertEqual(s["allocated_bytes.all.current"], 1024 + 3 * MiB)
        self.assertEqual(s["requested_bytes.all.current"], 1000 + 3 * MiB)
        self.assertEqual(s["reserved_bytes.all.current"], 6 * MiB)
        self.assertEqual(s["allocation.all.current"], 2)
        self.assertEqual(s["num_device_alloc"], 3)
        self.assertEqual(s["vram.maps"], 3)

        free(big, 3 * MiB, 2)
        s = vram.memory_stats(2)
        self.assertEqual(s["allocated_bytes.all.current"], 1024)
        self.assertEqual(s["allocated_bytes.all.peak"], 1024 + 3 * MiB)
        self.assertEqual(s["reserved_bytes.all.current"], 6 * MiB)  # kept mapped until growth or a trim
        self.assertEqual((s["allocation.all.allocated"], s["allocation.all.freed"]), (2, 1))

        self.assertEqual(vram.empty_cache(2), 4 * MiB)  # the large zone's two handles
        s = vram.memory_stats(2)
        self.assertEqual(s["reserved_bytes.all.current"], 2 * MiB)
        self.assertEqual(s["reserved_bytes.all.peak"], 6 * MiB)
        self.assertEqual((s["num_device_free"], s["vram.unmaps"]), (2, 2))

        vram.reset_peak_memory_stats(2)
        self.assertEqual(vram.max_memory_allocated(2), 1024)
        self.assertEqual(vram.max_memory_reserved(2), 2 * MiB)
        self.assertEqual(vram.memory_allocated("cuda:2"), 1024)
        self.assertEqual(vram.memory_reserved(2), 2 * MiB)
        self.assertEqual(vram.memory_summary(2), (
            "vram, device 2: simulated device #2 (64 MiB, 2 MiB granules)\n"
            "limit: none\n"
            "               current        peak\n"
            "allocated     1.00 KiB    1.00 KiB\n"
            "reserved      2.00 MiB    2.00 MiB\n"
            "requested       1000 B           -\n"
            "cached        2.00 MiB           -\n"
            "blocks: 1 live, 2 allocated, 1 freed, 0 refused for lack of memory, 0 served after recycling\n"
            "device calls: 3 handles created, 2 released, 3 maps, 2 unmaps\n"))
        snap = vram.memory_snapshot(2)
        self.assertEqual(snap["policy"], "vram")
        self.assertEqual([(b["address"], b["bytes"], b["state"]) for b in snap["blocks"]], [(small, 1024, "live")])
        self.assertEqual(len(snap["handles"]), 1)
        free(small, 1000, 2)

    def test_an_allocation_past_the_device_counts_as_an_oom_and_says_why(self):
        self.assertIsNone(malloc(128 * MiB, 4))
        code = _library.load().vram_last_error_code()
        with self.assertRaises(vram.OutOfMemoryError) as caught:
            _library.check(code)
        self.assertEqual(caught.exception.code, 1)
        self.assertIsInstance(caught.exception, MemoryError)
        self.assertIn("out of memory allocating 128.00 MiB", str(caught.exception))
        self.assertEqual(vram.memory_stats(4)["num_ooms"], 1)

    def test_a_limit_is_kept_and_refuses_what_would_pass_it(self):
        vram.set_memory_limit(8 * MiB, 3)
        self.assertEqual(vram.get_memory_limit(3), 8 * MiB)
        self.assertEqual(vram.memory_stats(3)["vram.limit_bytes"], 8 * MiB)
        self.assertIn("limit: 8.00 MiB\n", vram.memory_summary(3))
        self.assertIsNone(malloc(16 * MiB, 3))
        p = malloc(4 * MiB, 3)
        self.assertTrue(p)
        free(p, 4 * MiB, 3)
        vram.set_memory_limit(0, 3)
        self.assertEqual(vram.get_memory_limit(3), 0)
        with self.assertRaises(ValueError):
            vram.set_memory_limit(-1, 3)

    def test_bad_devices_are_errors_that_name_the_range(self):
        with self.assertRaises(vram.VramError) as caught:
            vram.memory_stats(8)
        self.assertEqual(caught.exception.code, 2)
        self.assertIn("device 8 is out of range", str(caught.exception))
        with self.assertRaises(ValueError):
            vram.memory_stats("cpu")
        with self.assertRaises(TypeError):
            vram.memory_stats(True)

    def test_devices_are_counted_and_named(self):
        self.assertEqual(vram.device_count(), 8)
        self.assertEqual(vram.device_name(5), "simulated device #5 (64 MiB, 2 MiB granules)")

    def test_torch_like_devices_are_read(self):
        class Dev:
            type, index = "cuda", 6
        self.assertEqual(vram._index(Dev()), 6)
        self.assertEqual(vram._index("cuda"), 0)
        self.assertEqual(vram._index(None), 0)


class Recording(unittest.TestCase):
    def test_a_recording_holds_every_call_made_while_it_ran(self):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "run.vram"
            vram.record_start(path)
            a = malloc(1000, 0)
            b = malloc(2 * MiB, 0)
            free(a, 1000, 0)
            free(b, 2 * MiB, 0)
            with self.assertRaises(vram.VramError) as caught:
                vram.record_start(path)
            self.assertIn("is under way", str(caught.exception))
            vram.record_stop()
            data = path.read_bytes()
            self.assertEqual(data[:8], b"\x89VRAMTR\n")
            self.assertEqual(int.from_bytes(data[16:24], "little"), 4)  # two allocations and two frees
            self.assertEqual(int.from_bytes(data[24:32], "little"), len(data) - 40)

    def test_a_recording_into_a_missing_folder_is_refused(self):
        with self.assertRaises(vram.VramError) as caught:
            vram.record_start("/nonexistent-folder/run.vram")
        self.assertIn("cannot create", str(caught.exception))


class Loading(unittest.TestCase):
    def run_python(self, code, **env):
        full = dict(os.environ, **env)
        full["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)

    def test_vram_library_names_the_one_library_looked_at(self):
        r = self.run_python("import vram; vram.device_count()", VRAM_LIBRARY="/nonexistent/libvram.so")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("libvram.so could not be loaded; looked at:\n  /nonexistent/libvram.so (VRAM_LIBRARY): "
                      "no such file", r.stderr)

    def test_the_library_in_use_is_the_one_named(self):
        self.assertEqual(Path(vram.library_path()).resolve(), Path(os.environ["VRAM_LIBRARY"]).resolve()
                         if "VRAM_LIBRARY" in os.environ else Path(vram.library_path()).resolve())
        self.assertTrue(Path(vram.library_path()).is_file())

    def test_loads_where_glibc_leaves_no_static_tls_for_dlopen(self):
        r = self.run_python("import vram; print(vram.device_count())",
                            GLIBC_TUNABLES="glibc.rtld.optional_static_tls=0")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "8\n", ""))


if __name__ == "__main__":
    unittest.main()
