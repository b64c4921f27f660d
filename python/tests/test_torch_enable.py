"""vram.torch.enable() without PyTorch: each case runs in a fresh Python with a stand-in `torch` module put in
sys.modules, which records what enable() hands to PyTorch (the library, the two function names), so the
settings' variables, the order of the checks and the refusal of CUDA graph capture are seen exactly.

Where the allocator's library matters, the case loads a copy of libvram.so from a folder of its own, with or
without a libvram_torch.so beside it (the stand-in never loads that file, so an empty one will do)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

PACKAGE = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, PACKAGE)

import vram  # noqa: E402

FAKE_TORCH = textwrap.dedent("""
    import sys, types
    torch = types.ModuleType("torch")
    torch.cuda = types.ModuleType("torch.cuda")
    torch.cuda.memory = types.ModuleType("torch.cuda.memory")
    calls = []
    state = {"initialized": INITIALIZED}
    torch.cuda.is_initialized = lambda: state["initialized"]
    class CUDAPluggableAllocator:
        def __init__(self, path, malloc_name, free_name):
            calls.append(("allocator", path, malloc_name, free_name))
    torch.cuda.memory.CUDAPluggableAllocator = CUDAPluggableAllocator
    torch.cuda.memory.change_current_allocator = lambda a: calls.append(("change", type(a).__name__))
    class CUDAGraph:
        def capture_begin(self, *args, **kwargs):
            calls.append(("capture",))
    original_capture_begin = CUDAGraph.capture_begin
    torch.cuda.CUDAGraph = CUDAGraph
    class graph:  # torch.cuda.graph: enters its capture stream, then calls capture_begin
        def __init__(self, cuda_graph):
            self.cuda_graph = cuda_graph
        def __enter__(self):
            calls.append(("capture stream",))
            self.cuda_graph.capture_begin()
        def __exit__(self, *exc):
            return False
    torch.cuda.graph = graph
    sys.modules["torch"] = torch
    sys.modules["torch.cuda"] = torch.cuda
    """)


def run(body, initialized=False, **env):
    """Runs body after the stand-in torch, in a Python with no VRAM_* variable but VRAM_LIBRARY and
    VRAM_DEVICE=sim:64MiB (and env)."""
    code = FAKE_TORCH.replace("INITIALIZED", str(initialized)) + textwrap.dedent(body)
    full = {k: v for k, v in os.environ.items() if not k.startswith("VRAM_") or k == "VRAM_LIBRARY"}
    full.update(PYTHONPATH=PACKAGE, VRAM_DEVICE="sim:64MiB")
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)


def library_copy(folder, shim):
    """A copy of the library in use in folder, with an empty libvram_torch.so beside it when shim."""
    path = Path(folder) / "libvram.so"
    shutil.copyfile(vram.library_path(), path)
    if shim:
        (Path(folder) / "libvram_torch.so").write_bytes(b"")
    return str(path)


ENABLE_TWICE = """
    import json, os, warnings
    import vram, vram.torch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = vram.torch.enable()
        again = vram.torch.enable()
    print(json.dumps({"calls": calls, "same": again is state, "functions": state["functions"],
                      "warned": [str(w.message) for w in caught]}))
    """


class Enable(unittest.TestCase):
    def test_settings_become_variables_that_reach_the_pool(self):
        r = run("""
            import json, os, warnings
            import vram, vram.torch
            warnings.simplefilter("ignore")
            state = vram.torch.enable(limit="8MiB", max_cached_ratio=0.1, aliasing=False, thread_cache=True,
                                      burst_bytes=1e9, burst_window=2.5)
            again = vram.torch.enable(limit="8MiB", max_cached_ratio=0.1, aliasing=False, thread_cache=True,
                                      burst_bytes=1e9, burst_window=2.5)
            env = {k: v for k, v in os.environ.items() if k.startswith("VRAM_") and k not in ("VRAM_LIBRARY", "VRAM_DEVICE")}
            print(json.dumps({"env": env, "calls": calls, "same": again is state, "enabled": vram.torch.enabled(),
                              "limit": vram.get_memory_limit(1), "record": state["record"]}))
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["env"], {"VRAM_LIMIT": "8MiB", "VRAM_MAX_CACHED_RATIO": "0.1", "VRAM_ALIASING": "0",
                                      "VRAM_THREAD_CACHE": "1", "VRAM_BURST_BYTES": "1000000000",
                                      "VRAM_BURST_WINDOW": "2.5"})
        self.assertEqual(out["limit"], 8 << 20)  # the pool made after enable() read VRAM_LIMIT
        self.assertEqual([c[0] for c in out["calls"]], ["allocator", "change"])
        self.assertEqual(out["calls"][1], ["change", "CUDAPluggableAllocator"])
        self.assertTrue(out["same"])
        self.assertTrue(out["enabled"])
        self.assertIsNone(out["record"])

    def test_without_the_shim_libvram_so_s_own_functions_and_one_warning(self):
        with tempfile.TemporaryDirectory() as folder:
            library = library_copy(folder, shim=False)
            r = run(ENABLE_TWICE, VRAM_LIBRARY=library)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["calls"], [["allocator", library, "vram_malloc", "vram_free"],
                                        ["change", "CUDAPluggableAllocator"]])
        self.assertTrue(out["same"])
        self.assertEqual(len(out["warned"]), 1)
        self.assertIn("libvram_torch.so was not found", out["warned"][0])
        self.assertIn("a tensor with a NULL pointer rather than torch.OutOfMemoryError", out["warned"][0])

    def test_the_shim_beside_libvram_so_is_handed_over(self):
        with tempfile.TemporaryDirectory() as folder:
            library = library_copy(folder, shim=True)
            r = run(ENABLE_TWICE, VRAM_LIBRARY=library)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["calls"][0], ["allocator", str(Path(folder) / "libvram_torch.so"),
                                           "vram_torch_malloc", "vram_torch_free"])
        self.assertEqual(out["warned"], [])

    def test_vram_torch_library_names_the_shim(self):
        with tempfile.TemporaryDirectory() as folder:
            shim = Path(folder) / "elsewhere.so"
            shim.write_bytes(b"")
            r = run(ENABLE_TWICE, VRAM_TORCH_LIBRARY=str(shim))
            self.assertEqual(json.loads(r.stdout)["calls"][0], ["allocator", str(shim), "vram_torch_malloc",
                                                                 "vram_torch_free"], r.stderr)
        r = run("""
            import vram, vram.torch
            try:
                vram.torch.enable()
            except vram.VramError as e:
                print("refused:", e)
            print(calls, vram.torch.enabled())
            """, VRAM_TORCH_LIBRARY="/nonexistent/libvram_torch.so")
        self.assertEqual(r.stdout, "refused: VRAM_TORCH_LIBRARY=/nonexistent/libvram_torch.so: no such file\n"
                                   "[] False\n", r.stderr)

    def test_after_cuda_is_initialised_enable_refuses_and_changes_nothing(self):
        r = run("""
            import os, vram, vram.torch
            try:
                vram.torch.enable(limit=1 << 30)
            except vram.VramError as e:
                print("refused:", e)
            print(calls, vram.torch.enabled(), "VRAM_LIMIT" in os.environ)
            """, initialized=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("refused: vram.torch.enable() must come before CUDA is initialised (before the first CUDA "
                      "tensor or torch.cuda call that starts CUDA)", r.stdout)
        self.assertIn("restart the process", r.stdout)
        self.assertTrue(r.stdout.endswith("[] False False\n"), r.stdout)

    def test_an_unknown_setting_names_the_known_ones(self):
        r = run("""
            import vram.torch
            for bad in ({"max_cached": 1}, {"limit": None}):
                try:
                    vram.torch.enable(**bad)
                except TypeError as e:
                    print(e)
            print(calls)
            """)
        self.assertEqual(r.stdout, "unknown vram setting 'max_cached'; the settings: limit, max_cached_ratio, "
                                   "max_handle, small_handle, block_handles, burst_bytes, burst_window, spare_slack, "
                                   "holes_below_peak, aliasing, "
                                   "reserve_ratio, thread_cache, thread_cache_bytes, membarrier\n"
                                   "vram setting limit=None: want an int, a float, a bool or a string\n[]\n",
                         r.stderr)

    def test_a_bad_value_is_refused_at_once_and_changes_nothing(self):
        # The library reads the variables only when it makes a device's pool: without the check, enable() would
        # return and every later allocation fail.
        r = run("""
            import os, vram, vram.torch
            for bad in ({"limit": "8gib"}, {"limit": "8GiB", "burst_window": "2h"}, {"block_handles": 1025},
                        {"aliasing": "yes"}):
                try:
                    vram.torch.enable(**bad)
                except ValueError as e:
                    print(e)
            try:
                vram.torch.enable(record=None, limit=True)
            except TypeError as e:
                print(e)
            print(calls, vram.torch.enabled(), [k for k in os.environ if k.startswith("VRAM_") and k not in
                                                 ("VRAM_DEVICE", "VRAM_LIBRARY")])
            vram.torch.enable(limit="8GiB")
            print(vram.torch.enabled(), os.environ["VRAM_LIMIT"])
            """)
        self.assertEqual(r.stdout, (
            "vram setting limit: bad size '8gib': unknown unit 'gib' (write e.g. 512, 64MiB, 80GiB)\n"
            "vram setting burst_window: bad duration '2h': unknown unit 'h' (write e.g. 250us, 5ms, 1.5s)\n"
            "vram setting block_handles: '1025': want a whole number from 0 to 1024\n"
            "vram setting aliasing: 'yes': want 1 or 0\n"
            "vram setting limit=True: a bool is for a flag (holes_below_peak, aliasing, thread_cache, membarrier)\n"
            "[] False []\n"
            "True 8GiB\n"), r.stderr)

    def test_record_is_a_path(self):
        r = run("""
            import os, vram, vram.torch
            try:
                vram.torch.enable(record=5)
            except TypeError as e:
                print(e)
            print(calls, vram.torch.enabled())
            """)
        self.assertEqual(r.stdout, "path 5: want a str, bytes or os.PathLike\n[] False\n", r.stderr)

    def test_other_settings_on_a_second_call_are_refused(self):
        r = run("""
            import vram, vram.torch
            vram.torch.enable(limit=1 << 30)
            try:
                vram.torch.enable(limit=2 << 30)
            except vram.VramError as e:
                print("refused:", e)
            """)
        self.assertIn("refused: vram.torch.enable() was already called with {'limit': 1073741824}", r.stdout)

    def test_cuda_graph_capture_is_refused_with_the_reason(self):
        r = run("""
            import vram, vram.torch, torch
            graph = torch.cuda.CUDAGraph
            print(graph.capture_begin is original_capture_begin)
            vram.torch.enable()
            print(graph.capture_begin is original_capture_begin, graph._vram_original_capture_begin is original_capture_begin)
            try:
                graph().capture_begin()
            except vram.VramError as e:
                print("refused:", e)
            try:
                with torch.cuda.graph(graph()):
                    print("captured")
            except vram.VramError as e:
                print("refused too:", str(e)[:40])
            vram.torch.enable()  # a second call wraps nothing twice
            print(graph._vram_original_capture_begin is original_capture_begin)
            print(torch.cuda.graph._vram_original_enter.__qualname__)
            print(calls[-1])
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(lines[:2], ["True", "False True"])
        self.assertTrue(lines[2].startswith("refused: CUDA graph capture is not supported under vram's pool: "),
                        lines[2])
        self.assertIn("in a process that uses PyTorch's own allocator", lines[2])
        self.assertEqual(lines[3:], [  # neither the capture stream nor the original capture_begin was reached
            "refused too: CUDA graph capture is not supported unde", "True", "graph.__enter__",
            "('change', 'CUDAPluggableAllocator')"])

    def test_record_starts_a_recording(self):
        r = run("""
            import os, tempfile, vram, vram.torch
            folder = tempfile.mkdtemp()
            path = os.path.join(folder, "run.vram")
            vram.torch.enable(record=path)
            vram._library.free(vram._library.malloc(4096, 0), 4096, 0)
            vram.record_stop()
            data = open(path, "rb").read()
            print(data[:8], int.from_bytes(data[16:24], "little"))
            """, VRAM_THREAD_CACHE="0")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "b'\\x89VRAMTR\\n' 2"), r.stderr)

    def test_a_recording_that_cannot_start_leaves_the_allocator_alone(self):
        r = run("""
            import vram, vram.torch
            try:
                vram.torch.enable(record="/nonexistent-folder/run.vram")
            except vram.VramError as e:
                print("refused:", e)
            print(calls, vram.torch.enabled())
            """)
        self.assertIn("refused: vram_record_start(path=/nonexistent-folder/run.vram)", r.stdout, r.stderr)
        self.assertTrue(r.stdout.endswith("[] False\n"), r.stdout)

    def test_importing_vram_torch_imports_no_torch(self):
        code = "import sys, vram.torch; print('torch' in sys.modules)"
        r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PACKAGE),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.stdout, "False\n", r.stderr)

    def test_without_torch_enable_says_so(self):
        code = "import sys; sys.modules['torch'] = None\nimport vram, vram.torch\ntry:\n    vram.torch.enable()\n" \
               "except vram.VramError as e:\n    print(type(e).__name__, e.__cause__.__class__.__name__, e)\n"
        r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PACKAGE),
                           capture_output=True, text=True, timeout=60)
        self.assertTrue(r.stdout.startswith("VramError ModuleNotFoundError vram.torch needs PyTorch, which cannot be "
                                            "imported here"), r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
