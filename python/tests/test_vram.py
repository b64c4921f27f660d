"""The vram package over libvram.so on simulated devices of 64 MiB (VRAM_DEVICE=sim:64MiB, set here whatever
the caller's environment says) with threads' caches off, so every figure follows from the calls alone. Pools live as long as the
process, so each test that needs absolute figures takes a device of its own (0 to 7).

Sizes round up to 512 bytes (1000 -> 1024). A block of up to 64 KiB lives in the tiny zone's 2 MiB handle; a
3 MiB block takes two 2 MiB handles of the large zone: 6 MiB reserved for the two.
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
for _name in [n for n in os.environ if n.startswith("VRAM_") and n not in ("VRAM_LIBRARY", "VRAM_CLI")]:
    del os.environ[_name]  # no device, setting or recording from the caller's environment
os.environ["VRAM_DEVICE"] = "sim:64MiB"  # every figure below is worked out for it
os.environ["VRAM_THREAD_CACHE"] = "0"
sys.path.insert(0, str(PACKAGE))

import vram  # noqa: E402
from vram import _library  # noqa: E402
from vram._library import free, malloc  # noqa: E402

MiB = 1 << 20


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
        self.assertEqual(s["vram.mapped_bytes"], 6 * MiB)
        self.assertEqual(s["vram.cached_bytes"], 6 * MiB - 1024 - 3 * MiB)

        free(big, 3 * MiB, 2)
        s = vram.memory_stats(2)
        self.assertEqual(s["allocated_bytes.all.current"], 1024)
        self.assertEqual(s["allocated_bytes.all.peak"], 1024 + 3 * MiB)
        self.assertEqual(s["requested_bytes.all.current"], 1000)
        self.assertEqual(s["reserved_bytes.all.current"], 6 * MiB)  # kept mapped until growth or a trim
        self.assertEqual((s["allocation.all.allocated"], s["allocation.all.freed"]), (2, 1))
        self.assertEqual(s["allocation.all.current"], 1)

        self.assertEqual(vram.empty_cache(2), 4 * MiB)  # the large zone's two handles
        s = vram.memory_stats(2)
        self.assertEqual(s["reserved_bytes.all.current"], 2 * MiB)
        self.assertEqual(s["reserved_bytes.all.peak"], 6 * MiB)
        self.assertEqual((s["num_device_free"], s["vram.unmaps"]), (2, 2))
        self.assertEqual(vram.empty_cache(2), 0)  # the tiny zone's handle holds a live block

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
            "blocks: 1 live, 2 allocated, 1 freed, 0 refused for lack of memory, 0 retried after recycling\n"
            "device calls: 3 handles created, 2 released, 3 maps, 2 unmaps\n"))
        snap = vram.memory_snapshot(2)
        self.assertEqual(snap["policy"], "vram")
        self.assertEqual([(b["address"], b["bytes"], b["state"]) for b in snap["blocks"]], [(small, 1024, "live")])
        self.assertEqual(len(snap["handles"]), 1)

        free(small, 1000, 2)
        self.assertEqual(vram.empty_cache(2), 2 * MiB)
        s = vram.memory_stats(2)
        self.assertEqual((s["reserved_bytes.all.current"], s["allocation.all.current"]), (0, 0))
        self.assertEqual(vram.memory_snapshot(2)["blocks"], [])

    def test_every_key_and_only_these(self):
        self.assertEqual(sorted(vram.memory_stats(7)), sorted([
            "allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
            "reserved_bytes.all.peak", "requested_bytes.all.current", "allocation.all.current",
            "allocation.all.allocated", "allocation.all.freed", "num_ooms", "num_alloc_retries", "num_device_alloc",
            "num_device_free", "vram.cached_bytes", "vram.thread_cached_bytes", "vram.pending_bytes",
            "vram.mapped_bytes", "vram.maps", "vram.unmaps", "vram.limit_bytes"]))

    def test_the_stats_structure_has_the_header_s_fields_in_order(self):
        # The package reads the header's vram_stats, field for field: one missed would shift every later one.
        header = PACKAGE.parent / "include" / "vram" / "vram.h"
        if not header.exists():
            self.skipTest("no source tree beside the package")
        import re
        body = re.search(r"typedef struct vram_stats \{(.*?)\} vram_stats;", header.read_text(), re.S).group(1)
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        fields = re.findall(r"^\s*(\w+)\s+(\w+)\s*;", body, re.M)
        kinds = {"size_t": ctypes.c_size_t, "uint64_t": ctypes.c_uint64}
        unknown = [t for t, _ in fields if t not in kinds]
        self.assertEqual(unknown, [], "a field of a type this test does not map")
        self.assertEqual([(n, kinds[t]) for t, n in fields], _library.Stats._fields_)

    def test_an_allocation_past_the_device_is_an_oom_that_says_why(self):
        with self.assertRaises(vram.OutOfMemoryError) as caught:
            malloc(128 * MiB, 4)
        self.assertEqual(caught.exception.code, 1)
        self.assertIsInstance(caught.exception, MemoryError)
        self.assertIsInstance(caught.exception, RuntimeError)
        self.assertIn("vram_malloc(size=134217728, device=4, stream=0x0): vram: out of memory allocating 128.00 MiB",
                      str(caught.exception))
        s = vram.memory_stats(4)
        self.assertEqual((s["num_ooms"], s["allocation.all.allocated"], s["reserved_bytes.all.current"]), (1, 0, 0))
        self.assertIn("1 refused for lack of memory", vram.memory_summary(4))

    def test_a_bad_free_is_an_error_and_changes_nothing(self):
        p = malloc(4096, 5)
        free(p, 4096, 5)
        with self.assertRaises(vram.VramError) as caught:
            free(p, 4096, 5)
        self.assertEqual(caught.exception.code, 2)
        self.assertNotIsInstance(caught.exception, vram.OutOfMemoryError)
        self.assertIn("double free", str(caught.exception))
        self.assertEqual(vram.memory_stats(5)["allocation.all.freed"], 1)
        self.assertIsNone(malloc(0, 5))  # as cudaMalloc: no block, no error

    def test_a_limit_is_kept_and_refuses_what_would_pass_it(self):
        vram.set_memory_limit(8 * MiB, 3)
        self.assertEqual(vram.get_memory_limit(3), 8 * MiB)
        self.assertEqual(vram.memory_stats(3)["vram.limit_bytes"], 8 * MiB)
        self.assertIn("limit: 8.00 MiB\n", vram.memory_summary(3))
        with self.assertRaises(vram.OutOfMemoryError):
            malloc(16 * MiB, 3)
        p = malloc(4 * MiB, 3)
        free(p, 4 * MiB, 3)
        self.assertEqual(vram.memory_stats(3)["num_ooms"], 1)
        vram.set_memory_limit(0, 3)
        self.assertEqual(vram.get_memory_limit(3), 0)
        # Out of range or not whole: refused, and the limit stays as it was (none), never wrapped to 2**64 - 1,
        # to 0 or to 5 bytes.
        for bad in (-1, 2**64, 2**70, 2**64 + 5):
            with self.assertRaises(ValueError):
                vram.set_memory_limit(bad, 3)
        for bad in (1.5, "1GiB", True, None):
            with self.assertRaises(TypeError):
                vram.set_memory_limit(bad, 3)
        self.assertEqual(vram.get_memory_limit(3), 0)
        vram.set_memory_limit(2**64 - 1, 3)
        self.assertEqual(vram.get_memory_limit(3), 2**64 - 1)
        vram.set_memory_limit(0, 3)

    def test_bad_devices_are_errors_that_name_the_range(self):
        with self.assertRaises(vram.VramError) as caught:
            vram.memory_stats(8)
        self.assertEqual(caught.exception.code, 2)
        self.assertIn("device 8 is out of range", str(caught.exception))
        with self.assertRaises(vram.VramError) as caught:  # the largest index a C int holds reaches the library
            vram.device_name(2**31 - 1)
        self.assertIn("device 2147483647 is out of range", str(caught.exception))
        with self.assertRaises(ValueError):
            vram.memory_stats("cpu")
        with self.assertRaises(TypeError):
            vram.memory_stats(True)

    def test_devices_past_a_c_int_or_negative_are_refused_before_the_call(self):
        # ctypes would pass device 2**32 as 0 and 2**32 + 1 as 1: device 0's figures, device 1's name.
        class Dev:
            type, index = "cuda", 2**32
        calls = [vram.memory_stats, vram.memory_allocated, vram.memory_summary, vram.memory_snapshot,
                 vram.device_name, vram.empty_cache, vram.reset_peak_memory_stats, vram.get_memory_limit,
                 lambda d: vram.set_memory_limit(1 << 20, d)]
        for device, index in [(2**32, 2**32), (2**32 + 1, 2**32 + 1), (2**31, 2**31), (-1, -1), (-2**32, -2**32),
                              ("cuda:4294967296", 2**32), (Dev(), 2**32)]:
            for call in calls:
                with self.assertRaises(ValueError, msg=(device, call)) as caught:
                    call(device)
                self.assertEqual(str(caught.exception),
                                 f"device {index} is out of range: want an index from 0 to vram.device_count() - 1")
        self.assertEqual(vram.get_memory_limit(0), 0)
        with self.assertRaises(ValueError):
            vram._index("cuda:\u0661")  # an Arabic-Indic 1: not an index
        # An integer of another type (a numpy integer) is an index, as it is for sizes; a float or another
        # object is the wrong type, a text that names no CUDA device the wrong value.
        class Index:
            def __index__(self):
                return 1
        self.assertEqual(vram._index(Index()), 1)
        self.assertEqual(vram.device_name(Index()), vram.device_name(1))
        for wrong, kind in [(1.0, TypeError), (object(), TypeError), ("cpu", ValueError), ("cuda:x", ValueError)]:
            with self.assertRaises(kind, msg=wrong) as caught:
                vram.device_name(wrong)
            self.assertEqual(str(caught.exception), f"device {wrong!r}: want an index, 'cuda:N' or a torch.device")

    def test_sizes_devices_and_streams_past_the_c_types_are_refused_before_the_call(self):
        # ctypes would wrap them: a size of 2**64 + 4096 to 4096 bytes, 2**63 to a negative one, device 2**32 + 6
        # to 6. Device 6 is this test's alone.
        size_range = "is out of range: want bytes from 0 to 2**63 - 1"
        device_range = "is out of range: want an index from 0 to vram.device_count() - 1"
        cases = [
            ((2**64 + 4096, 6), ValueError, f"size 18446744073709555712 {size_range}"),
            ((2**63, 6), ValueError, f"size 9223372036854775808 {size_range}"),
            ((-1, 6), ValueError, f"size -1 {size_range}"),
            ((4096, 2**32 + 6), ValueError, f"device 4294967302 {device_range}"),
            ((4096, -1), ValueError, f"device -1 {device_range}"),
            ((4096, 6, 2**64), ValueError, "stream 18446744073709551616 is out of range: want an address from 0 to "
                                           "2**64 - 1"),
            ((1.5, 6), TypeError, "size 1.5: want a whole number"),
            ((True, 6), TypeError, "size True: want a whole number"),
            ((4096, "6"), TypeError, "device '6': want a whole number"),
        ]
        for args, kind, message in cases:
            with self.assertRaises(kind, msg=args) as caught:
                malloc(*args)
            self.assertEqual(str(caught.exception), message)
        s = vram.memory_stats(6)  # nothing reached the pool
        self.assertEqual((s["allocation.all.allocated"], s["reserved_bytes.all.current"]), (0, 0))

        p = malloc(4096, 6)
        for args, message in [((p, 2**64 + 4096, 6), f"size 18446744073709555712 {size_range}"),
                              ((p, 4096, 2**32 + 6), f"device 4294967302 {device_range}"),
                              ((p + 2**64, 4096, 6), f"pointer {p + 2**64} is out of range: want an address from 0 "
                                                     "to 2**64 - 1")]:
            with self.assertRaises(ValueError, msg=args) as caught:
                free(*args)
            self.assertEqual(str(caught.exception), message)
        self.assertEqual(vram.memory_stats(6)["allocation.all.current"], 1)  # still live
        free(p, 4096, 6)
        with self.assertRaises(vram.OutOfMemoryError) as caught:  # the largest size an ssize_t holds reaches the pool
            malloc(2**63 - 1, 6)
        self.assertIn("vram_malloc(size=9223372036854775807, device=6, stream=0x0): vram: out of memory",
                      str(caught.exception))
        s = vram.memory_stats(6)
        self.assertEqual((s["allocation.all.allocated"], s["allocation.all.freed"]), (1, 1))

    def test_devices_are_counted_and_named(self):
        self.assertEqual(vram.device_count(), 8)
        self.assertEqual(vram.device_name(5), "simulated device #5 (64 MiB, 2 MiB granules)")
        self.assertEqual(vram.device_name(), "simulated device #0 (64 MiB, 2 MiB granules)")

    def test_devices_are_read_as_torch_writes_them(self):
        class Dev:
            def __init__(self, type, index):
                self.type, self.index = type, index
        self.assertEqual(vram._index(Dev("cuda", 6)), 6)
        self.assertEqual(vram._index(Dev("cuda", None)), 0)  # the current device; 0 before torch starts CUDA
        self.assertEqual(vram._index("cuda:3"), 3)
        self.assertEqual(vram._index("cuda"), 0)
        self.assertEqual(vram._index(None), 0)
        with self.assertRaises(ValueError):
            vram._index(Dev("cpu", None))
        with self.assertRaises(ValueError):
            vram._index("cuda:x")

    def test_sizes_are_written_for_people(self):
        cases = {0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 3 * MiB: "3.00 MiB",
                 1023 * MiB: "1023.00 MiB", 8 << 30: "8.00 GiB", 5 * (1 << 40): "5120.00 GiB"}
        self.assertEqual({n: vram.format_bytes(n) for n in cases}, cases)


class Recording(unittest.TestCase):
    def test_a_recording_holds_every_call_made_while_it_ran(self):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "run.vram"
            malloc_before = malloc(512, 0)  # made before the recording: its free alone is recorded
            vram.record_start(path)
            a = malloc(1000, 0)
            b = malloc(2 * MiB, 0)
            free(a, 1000, 0)
            free(b, 2 * MiB, 0)
            free(malloc_before, 512, 0)
            with self.assertRaises(vram.VramError) as caught:
                vram.record_start(path)
            self.assertEqual(caught.exception.code, 2)
            self.assertIn("is under way", str(caught.exception))
            vram.record_stop()
            vram.record_stop()  # none under way: nothing to do
            free(malloc(4096, 0), 4096, 0)  # after the recording: not in it
            data = path.read_bytes()
            self.assertEqual(data[:8], b"\x89VRAMTR\n")
            self.assertEqual(int.from_bytes(data[16:24], "little"), 5)  # two allocations and three frees
            self.assertEqual(int.from_bytes(data[24:32], "little"), len(data) - 40)

    def test_a_path_is_a_str_bytes_or_path_like(self):
        with tempfile.TemporaryDirectory() as folder:
            here = os.getcwd()
            os.chdir(folder)
            try:
                for bad in (None, 5, ["run.vram"]):
                    with self.assertRaises(TypeError) as caught:
                        vram.record_start(bad)
                    self.assertEqual(str(caught.exception), f"path {bad!r}: want a str, bytes or os.PathLike")
                with self.assertRaises(ValueError) as caught:
                    vram.record_start("run\0.vram")  # C would cut it at the NUL
                self.assertEqual(str(caught.exception), "path 'run\\x00.vram' holds a NUL character")
                self.assertEqual(os.listdir("."), [])  # no file named None, 5, ... or run
                vram.record_start(b"run.vram")
                vram.record_stop()
                self.assertEqual(os.listdir("."), ["run.vram"])
            finally:
                os.chdir(here)

    def test_a_recording_into_a_missing_folder_is_refused(self):
        with self.assertRaises(vram.VramError) as caught:
            vram.record_start("/nonexistent-folder/run.vram")
        self.assertEqual(caught.exception.code, 2)  # VRAM_ERROR_INVALID_ARGUMENT, as vram.h says
        self.assertIn("vram_record_start(path=/nonexistent-folder/run.vram): /nonexistent-folder/run.vram: "
                      "cannot create", str(caught.exception))


class RecordingFromTheEnvironment(unittest.TestCase):
    def test_vram_record_is_written_at_exit_and_replays_to_the_programs_peak_live(self):
        """VRAM_RECORD=path in a program's environment, no call to stop it: the program's exit flushes the
        trace, and `vram replay` of it gives the bytes the program held at its peak."""
        # The vram tool: VRAM_CLI, else beside the library in use (a build folder holds both).
        cli = os.environ.get("VRAM_CLI") or str(Path(vram.library_path()).parent / "vram")
        if not Path(cli).is_file():
            self.skipTest(f"no vram tool at {cli} (set VRAM_CLI)")
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "run.vram"
            # 3 MiB, then 1000 bytes; the 3 MiB go; then 5 MiB, left live at exit with the 1000 bytes.
            code = ("from vram._library import free, malloc\n"
                    "a = malloc(3 << 20, 0)\nb = malloc(1000, 0)\nfree(a, 3 << 20, 0)\nc = malloc(5 << 20, 0)\n")
            env = dict(os.environ, PYTHONPATH=str(PACKAGE), VRAM_RECORD=str(path), VRAM_LIBRARY=vram.library_path())
            r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual((r.returncode, r.stderr), (0, ""))
            r = subprocess.run([cli, "replay", str(path), "--policy", "vram", "--device", "sim", "--json"],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            row = json.loads(r.stdout)[0]
        self.assertEqual((row["events"], row["allocations"], row["unmatched_frees"]), (4, 3, 0))
        self.assertEqual(row["peak_live_bytes"], 5 * MiB + 1000)  # the last two together, more than 3 MiB + 1000
        self.assertEqual(row["peak_allocated_bytes"], 5 * MiB + 1024)  # 1000 rounds up to 512 bytes' multiple


    def test_a_worker_that_inherits_vram_record_records_beside_its_parent(self):
        """A worker process started with spawn inherits VRAM_RECORD: it records to run.vram.pidN, said on
        stderr, and the parent's file stays whole, with the parent's calls alone."""
        code = textwrap.dedent("""
            import multiprocessing as mp, os, sys
            from vram._library import free, malloc
            def worker():
                p = malloc(2048, 0)
                free(p, 2048, 0)
            if __name__ == "__main__":
                a = malloc(1000, 0)
                mp.set_start_method("spawn")
                w = mp.Process(target=worker)
                w.start()
                w.join()
                free(a, 1000, 0)
                print(w.pid)
            """)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "run.vram"
            script = Path(folder) / "main.py"
            script.write_text(code)
            env = dict(os.environ, PYTHONPATH=str(PACKAGE), VRAM_RECORD=str(path), VRAM_LIBRARY=vram.library_path())
            r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            child = int(r.stdout)
            mine = f"{path}.pid{child}"
            self.assertEqual(r.stderr, f"vram: another process is recording to {path}; this one (pid {child}) "
                                       f"records to {mine}\n")
            self.assertEqual(sorted(p.name for p in Path(folder).iterdir()),
                             sorted(["main.py", "run.vram", f"run.vram.pid{child}"]))
            cli = os.environ.get("VRAM_CLI") or str(Path(vram.library_path()).parent / "vram")
            if not Path(cli).is_file():
                self.skipTest(f"no vram tool at {cli} (set VRAM_CLI)")
            for name, size in ((path, 1000), (mine, 2048)):  # each process's one block, whole
                r = subprocess.run([cli, "replay", str(name), "--policy", "vram", "--device", "sim", "--json"],
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                row = json.loads(r.stdout)[0]
                self.assertEqual((row["events"], row["allocations"], row["peak_live_bytes"]), (2, 1, size), name)


class Loading(unittest.TestCase):
    """Where the library is looked for, each case in a fresh Python so that nothing is loaded yet."""

    def run_python(self, code, package=PACKAGE, **env):
        full = {k: v for k, v in os.environ.items() if k != "VRAM_LIBRARY"}
        full.update(env, PYTHONPATH=str(package))
        return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60,
                              cwd=tempfile.gettempdir())

    def tree(self, folder, source_tree, beside, built):
        """A copy of the package in folder/python/vram, with include/vram/vram.h beside it (a source tree)
        or not, and libvram.so beside the package and in folder/build, or not. Returns folder/python."""
        package = Path(folder) / "python"
        shutil.copytree(PACKAGE / "vram", package / "vram", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        if source_tree:
            (Path(folder) / "include" / "vram").mkdir(parents=True)
            (Path(folder) / "include" / "vram" / "vram.h").write_text("")
        library = vram.library_path()
        if beside:
            os.symlink(library, package / "vram" / "libvram.so")
        if built:
            (Path(folder) / "build").mkdir()
            os.symlink(library, Path(folder) / "build" / "libvram.so")
        return package

    def test_vram_library_names_the_one_library_looked_at(self):
        r = self.run_python("import vram; vram.device_count()", VRAM_LIBRARY="/nonexistent/libvram.so")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("\nvram.VramError: libvram.so could not be loaded; looked at:\n"
                      "  /nonexistent/libvram.so (VRAM_LIBRARY): no such file\n", r.stderr)

    def test_a_folder_is_named_as_a_folder(self):
        with tempfile.TemporaryDirectory() as folder:
            r = self.run_python("import vram; vram.device_count()", VRAM_LIBRARY=folder)
        self.assertIn(f"\nvram.VramError: libvram.so could not be loaded; looked at:\n"
                      f"  {folder} (VRAM_LIBRARY): a folder, not a file\n", r.stderr)

    def test_the_errors_are_named_where_programs_find_them(self):
        self.assertEqual((vram.VramError.__module__, vram.VramError.__qualname__), ("vram", "VramError"))
        self.assertEqual(vram.OutOfMemoryError.__module__, "vram")
        self.assertIs(_library.VramError, vram.VramError)

    def test_a_file_that_is_no_library_is_named_with_the_loader_s_reason(self):
        with tempfile.TemporaryDirectory() as folder:
            bogus = Path(folder) / "libvram.so"
            bogus.write_text("not a library")
            r = self.run_python("import vram; vram.device_count()", VRAM_LIBRARY=str(bogus))
        self.assertIn(f"looked at:\n  {bogus} (VRAM_LIBRARY): {bogus}: ", r.stderr)

    def test_a_library_that_is_not_vrams_is_named_as_such(self):
        # The recorder, built beside libvram.so, is a library of vram's project but exports none of the C API.
        other = Path(vram.library_path()).with_name("libvram_record.so")
        if not other.exists():
            self.skipTest(f"{other} is not built")
        r = self.run_python("import vram; vram.device_count()", VRAM_LIBRARY=str(other))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(f"\nvram.VramError: {other}: not vram's C library (it has none of vram_malloc, "
                      f"vram_free, ...); point VRAM_LIBRARY at libvram.so", r.stderr)
        self.assertNotIn("older", r.stderr)

    def test_in_a_source_tree_beside_the_package_comes_before_the_build_folder(self):
        code = "import vram; print(vram.library_path()); print(vram.device_count())"
        with tempfile.TemporaryDirectory() as folder:
            package = self.tree(folder, source_tree=True, beside=True, built=True)
            r = self.run_python(code, package)
            self.assertEqual(r.stdout, f"{package / 'vram' / 'libvram.so'}\n8\n", r.stderr)
        with tempfile.TemporaryDirectory() as folder:
            package = self.tree(folder, source_tree=True, beside=False, built=True)
            r = self.run_python(code, package)
            self.assertEqual(r.stdout, f"{Path(folder) / 'build' / 'libvram.so'}\n8\n", r.stderr)

    def test_none_found_names_every_place_looked(self):
        code = "import vram\ntry:\n    vram.device_count()\nexcept vram.VramError as e:\n    print(e)"
        with tempfile.TemporaryDirectory() as folder:
            package = self.tree(folder, source_tree=True, beside=False, built=False)
            r = self.run_python(code, package)
            self.assertEqual(r.stdout, (
                "libvram.so could not be loaded; looked at:\n"
                f"  {package / 'vram' / 'libvram.so'} (beside the package): no such file\n"
                f"  {Path(folder) / 'build' / 'libvram.so'} (the source tree's build folder): no such file\n"
                "Build it (cmake --build build --target vram_c) and set VRAM_LIBRARY to its path.\n"), r.stderr)
        with tempfile.TemporaryDirectory() as folder:  # installed: no source tree around it, no build folder
            package = self.tree(folder, source_tree=False, beside=False, built=True)
            r = self.run_python(code, package)
            self.assertIn(f"looked at:\n  {package / 'vram' / 'libvram.so'} (beside the package): no such file\n"
                          "Build it", r.stdout)

    def test_the_library_in_use_is_the_one_named_or_the_first_found(self):
        named = os.environ.get("VRAM_LIBRARY")
        if named:
            self.assertEqual(vram.library_path(), os.path.abspath(named))
        else:
            first = next(p for p, _ in _library.candidates() if p.is_file())
            self.assertEqual(vram.library_path(), os.path.abspath(first))

    def test_loads_where_glibc_leaves_no_static_tls_for_dlopen(self):
        r = self.run_python("import vram; print(vram.device_count())", VRAM_LIBRARY=vram.library_path(),
                            GLIBC_TUNABLES="glibc.rtld.optional_static_tls=0")
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "8\n", ""))


if __name__ == "__main__":
    unittest.main()
