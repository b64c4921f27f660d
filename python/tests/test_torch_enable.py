"""vram.torch.enable() without PyTorch: each case runs in a fresh Python with a stand-in `torch` module put in
sys.modules, which records what enable() hands to PyTorch (the library, the two function names), so the
settings' variables, the order of the checks and the refusal of CUDA graph capture are seen exactly."""
import json
import os
import subprocess
import sys
import textwrap
import unittest
from pathlib import Path

PACKAGE = str(Path(__file__).resolve().parents[1])

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
    torch.cuda.CUDAGraph = CUDAGraph
    sys.modules["torch"] = torch
    sys.modules["torch.cuda"] = torch.cuda
    """)


def run(body, initialized=False, **env):
    code = FAKE_TORCH.replace("INITIALIZED", str(initialized)) + textwrap.dedent(body)
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("VRAM_") or k in ("VRAM_LIBRARY", "VRAM_DEVICE")}
    full.update(env, PYTHONPATH=PACKAGE)
    r = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)
    return r


class Enable(unittest.TestCase):
    def test_settings_become_variables_and_the_allocator_is_handed_to_torch(self):
        r = run("""
            import json, os, warnings
            import vram, vram.torch
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                state = vram.torch.enable(limit="8GiB", max_cached_ratio=0.1, aliasing=False, thread_cache=True)
            again = vram.torch.enable(limit="8GiB", max_cached_ratio=0.1, aliasing=False, thread_cache=True)
            env = {k: os.environ[k] for k in ("VRAM_LIMIT", "VRAM_MAX_CACHED_RATIO", "VRAM_ALIASING", "VRAM_THREAD_CACHE")}
            print(json.dumps({"env": env, "calls": calls, "same": again is state, "enabled": vram.torch.enabled(),
                              "library": vram.library_path(), "warned": [str(w.message)[:40] for w in caught]}))
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["env"], {"VRAM_LIMIT": "8GiB", "VRAM_MAX_CACHED_RATIO": "0.1", "VRAM_ALIASING": "0",
                                      "VRAM_THREAD_CACHE": "1"})
        shim = Path(out["library"]).resolve().parent / "libvram_torch.so"
        if shim.is_file():
            expected = [["allocator", str(shim), "vram_torch_malloc", "vram_torch_free"]]
        else:  # no PyTorch where this was built: libvram.so's own functions, with a warning
            expected = [["allocator", out["library"], "vram_malloc", "vram_free"]]
            self.assertEqual(len(out["warned"]), 1)
            self.assertTrue(out["warned"][0].startswith("vram: "), out["warned"])
        self.assertEqual(out["calls"], expected + [["change", "CUDAPluggableAllocator"]])
        self.assertTrue(out["same"])
        self.assertTrue(out["enabled"])

    def test_after_cuda_is_initialised_enable_refuses_and_changes_nothing(self):
        r = run("""
            import vram, vram.torch
            try:
                vram.torch.enable()
            except vram.VramError as e:
                print("refused:", e)
            print(calls, vram.torch.enabled())
            """, initialized=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("refused: vram.torch.enable() must come before CUDA is initialised", r.stdout)
        self.assertIn("[] False", r.stdout)

    def test_an_unknown_setting_names_the_known_ones(self):
        r = run("""
            import vram.torch
            try:
                vram.torch.enable(max_cached=1)
            except TypeError as e:
                print(e)
            """)
        self.assertEqual(r.stdout.strip(), "unknown vram setting 'max_cached'; the settings: limit, max_cached_ratio, "
                                           "max_handle, small_handle, burst_bytes, burst_window, aliasing, "
                                           "reserve_ratio, thread_cache, thread_cache_bytes, membarrier")

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
            vram.torch.enable()
            try:
                torch.cuda.CUDAGraph().capture_begin()
            except vram.VramError as e:
                print("refused:", e)
            print(calls[-1])
            """)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("refused: CUDA graph capture is not supported under vram's pool", r.stdout)
        self.assertIn("('change', 'CUDAPluggableAllocator')", r.stdout)  # the original capture never ran

    def test_record_starts_a_recording(self):
        r = run("""
            import os, tempfile, vram, vram.torch
            folder = tempfile.mkdtemp()
            path = os.path.join(folder, "run.vram")
            vram.torch.enable(record=path)
            lib = vram._library.load()
            lib.vram_free(lib.vram_malloc(4096, 0, None), 4096, 0, None)
            vram.record_stop()
            data = open(path, "rb").read()
            print(int.from_bytes(data[16:24], "little"))
            """, VRAM_THREAD_CACHE="0")
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "2"), r.stderr)

    def test_without_torch_enable_says_so(self):
        code = "import sys; sys.modules['torch'] = None\nimport vram, vram.torch\ntry:\n    vram.torch.enable()\n" \
               "except vram.VramError as e:\n    print(e)\n"
        r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PACKAGE),
                           capture_output=True, text=True, timeout=60)
        self.assertTrue(r.stdout.startswith("vram.torch needs PyTorch, which cannot be imported here"), r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
