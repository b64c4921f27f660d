#!/usr/bin/env python3
"""bench/torch/merge.py on hand-made torch-bench.json files: the figures it merges, what it says of vram
against the others, and the files it refuses to put side by side."""
import contextlib
import io
import json
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "torch"))
import merge  # noqa: E402

GPU = "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB"


def run(workload, allocator, repeat, *, steps=None, wall_s=100.0, nvml=None, reserved=None, driver_calls=None,
        failures=0, rc=0):
    return {"repeat": repeat, "workload": workload, "allocator": allocator, "rc": rc,
            "report": {"steps": steps, "wall_s": wall_s, "step_ms_median": None if steps is None else 100e3 / steps,
                       "nvml_peak_bytes": nvml, "allocator_peak_reserved_bytes": reserved,
                       "allocator_peak_allocated_bytes": None, "driver_calls": driver_calls,
                       "failures": failures, "error": None}}


def doc(runs, *, gpu=GPU, commit="a" * 40, seconds=None, steps=None, costs=None, opts=None, seed=0):
    return {"gpu": gpu, "git_commit": commit, "libvram": {"sha256": commit[:4] + "-lib"}, "runs": runs,
            "tensor_cost": costs or [],
            "settings": {"seconds": seconds or {}, "steps": steps or {}, "opts": opts or [], "seed": seed}}


def cost(allocator, repeat, ns_4k, ns_1m, ns_64m, cpu, rc=0):
    return {"repeat": repeat, "allocator": allocator, "rc": rc,
            "report": {"sizes": {"4KiB": {"median_ns": ns_4k}, "1MiB": {"median_ns": ns_1m},
                                 "64MiB": {"median_ns": ns_64m}}, "cpu_4KiB_ns": cpu, "error": None}}


def kernels(workload, allocator, repeat, step, kernel, busy, idle, rc=0, env=None):
    """One kernel_time.py run as run_all.py records it."""
    return {"repeat": repeat, "script": "kernel_time", "workload": workload, "allocator": allocator, "rc": rc,
            "report": {"steps": 30, "step_ms": step, "kernel_ms_per_step": kernel, "busy_ms_per_step": busy,
                       "idle_share": idle, "vram_env": env or {}, "error": None}}


def kernel_doc(entries, steps=30, commit="a" * 40):
    d = doc([], commit=commit)
    d["kernel_time"] = entries
    d["settings"]["kernel_time_steps"] = steps
    return d


class Merge(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="merge_test-"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, content):
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
        return str(path)

    def main(self, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = merge.main(list(args))
        return rc, out.getvalue(), err.getvalue()

    def serving(self, repeat, native_steps, vram_steps, expandable_nvml, vram_nvml, commit="a" * 40, gpu=GPU):
        return doc([run("serving", "native", repeat, steps=native_steps, nvml=1000, driver_calls=30),
                    run("serving", "expandable", repeat, steps=native_steps, nvml=expandable_nvml),
                    run("serving", "vram", repeat, steps=vram_steps, nvml=vram_nvml, reserved=400,
                        driver_calls=2800 + repeat)],
                   seconds={"serving": 100.0}, commit=commit, gpu=gpu)

    def test_two_repeats_of_a_timed_workload_from_two_files(self):
        a = self.write("r1/torch-bench.json", self.serving(1, 100, 110, 500, 505))
        b = self.write("r2/torch-bench-serving-r2.json", self.serving(2, 120, 130, 520, 509))
        out_json = str(self.dir / "merged.json")
        rc, out, err = self.main(str(Path(a).parent), b, "--json", out_json)
        self.assertEqual((rc, err), (0, ""))
        merged = json.loads(Path(out_json).read_text())
        cells = merged["workloads"]["serving"]["allocators"]
        self.assertEqual(list(cells), ["native", "expandable", "vram"])   # run_all.py's order
        self.assertEqual(cells["vram"]["repeats"], [1, 2])
        self.assertEqual(cells["vram"]["steps"], {"median": 120, "min": 110, "max": 130, "n": 2})
        self.assertEqual(cells["vram"]["driver_calls"]["median"], 2801.5)
        self.assertEqual(cells["native"]["step_ms_median"]["median"], (1000 + 100e3 / 120) / 2)
        v = merged["workloads"]["serving"]["vram"]
        # vram's median device peak 507 against expandable's 510 (native's 1000): 3 bytes under the lowest.
        self.assertEqual(v["nvml_peak_median"], 507)
        self.assertEqual((v["lowest_other"], v["nvml_peak_minus_lowest_other"]), ("expandable", -3))
        self.assertTrue(v["nvml_peak_at_or_below_every_other"])
        # Steps in the time: vram's median 120 against native's 110, within native's 100-120.
        self.assertEqual(v["time_measure"], "steps")
        self.assertAlmostEqual(v["vs_native"], 120 / 110)
        self.assertIs(v["within_native_range"], True)
        self.assertIn("serving/vram                       1,2", out)
        self.assertIn("device peak at or below every other's (-3 bytes against expandable's); steps 1.091x "
                      "native's median, within native's range", out)
        self.assertIn("110 [100-120]", out)

    def test_variants_of_vram_are_compared_with_vram_and_native_but_not_in_vrams_verdict(self):
        runs = [run("cnn_train", "native", 1, steps=5000, nvml=1000),
                run("cnn_train", "expandable", 1, steps=5050, nvml=900),
                run("cnn_train", "vram", 1, steps=4950, nvml=890),
                run("cnn_train", "vram-notc", 1, steps=5049.5, nvml=850),
                run("cnn_train", "vram-big", 1, steps=4900, nvml=None)]
        for r in runs[3:]:
            r["variant_of"] = "vram"
        rc, out, _ = self.main(self.write("v.json", doc(runs, seconds={"cnn_train": 20.0})),
                               "--json", str(self.dir / "m.json"))
        self.assertEqual(rc, 0)
        entry = json.loads((self.dir / "m.json").read_text())["workloads"]["cnn_train"]
        self.assertEqual(list(entry["allocators"]), ["native", "expandable", "vram", "vram-big", "vram-notc"])
        # vram's 890 against PyTorch's allocators only: 10 under expandable's 900, though vram-notc held 850.
        self.assertEqual((entry["vram"]["lowest_other"], entry["vram"]["nvml_peak_minus_lowest_other"]),
                         ("expandable", -10))
        # vram-notc: 5049.5 / 4950 = 1.0201 of vram's steps, 5049.5 / 5000 = 1.0099 of native's.
        self.assertAlmostEqual(entry["variants"]["vram-notc"]["vs_vram"], 5049.5 / 4950)
        self.assertAlmostEqual(entry["variants"]["vram-notc"]["vs_native"], 5049.5 / 5000)
        self.assertEqual(entry["variants"]["vram-big"]["time_measure"], "steps")
        self.assertIn("device peak at or below every other's (-10 bytes against expandable's)", out)
        self.assertIn("  vram-notc on cnn_train: steps 1.020x vram's, 1.010x native's (medians)", out)
        self.assertIn("  vram-big on cnn_train: steps 0.990x vram's, 0.980x native's (medians)", out)

    def test_vram_above_another_and_outside_natives_range(self):
        a = self.write("a.json", self.serving(1, 100, 90, 500, 600))
        b = self.write("b.json", self.serving(2, 104, 95, 500, 600))
        rc, out, _ = self.main(a, b)
        self.assertEqual(rc, 0)
        self.assertIn("device peak above expandable's (+100 bytes against expandable's)", out)
        self.assertIn("steps 0.907x native's median, outside native's range (slower)", out)

    def test_counted_steps_compare_wall_time_and_one_run_of_native_has_no_range(self):
        runs = [run("cnn_train", "native", 1, wall_s=10.0, nvml=300),
                run("cnn_train", "vram", 1, wall_s=9.5, nvml=300)]
        a = self.write("a.json", doc(runs, steps={"cnn_train": 30}))
        rc, out, _ = self.main(a, "--json", str(self.dir / "m.json"))
        self.assertEqual(rc, 0)
        v = json.loads((self.dir / "m.json").read_text())["workloads"]["cnn_train"]["vram"]
        self.assertEqual((v["time_measure"], v["vs_native"], v["within_native_range"]), ("wall_s", 0.95, None))
        self.assertTrue(v["at_least_as_fast_as_native"])
        self.assertTrue(v["nvml_peak_at_or_below_every_other"])   # equal counts as at
        self.assertIn("wall time 0.950x native's median, one run of native, no range", out)

    def test_a_wall_time_under_natives_fastest_is_outside_its_range_on_the_fast_side(self):
        runs = [run("cnn_train", "native", r, wall_s=w, nvml=300) for r, w in ((1, 10.0), (2, 12.0))]
        runs += [run("cnn_train", "vram", r, wall_s=9.0, nvml=300) for r in (1, 2)]
        rc, out, _ = self.main(self.write("a.json", doc(runs, steps={"cnn_train": 30})))
        self.assertEqual(rc, 0)
        # vram's median 9.0 s against native's 11.0 s (10-12): 0.818x, below native's fastest.
        self.assertIn("wall time 0.818x native's median, outside native's range (faster)", out)

    def test_the_per_tensor_cost_over_the_repeats(self):
        a = self.write("a.json", doc([], costs=[cost("vram", 1, 1600, 1650, 1700, 1200),
                                               cost("native", 1, 1900, 1950, 2000, 1210)]))
        b = self.write("b.json", doc([], costs=[cost("native", 2, 1850, 1900, 2100, 1190),
                                               cost("vram", 2, 1620, 1610, 1500, 1250),
                                               cost("vram", 3, 1700, 1630, 1640, 1240),
                                               cost("async", 3, 0, 0, 0, 0, rc=1)]))
        rc, out, _ = self.main(a, b, "--json", str(self.dir / "m.json"))
        self.assertEqual(rc, 0)
        t = json.loads((self.dir / "m.json").read_text())["tensor_cost"]
        self.assertEqual(list(t), ["native", "async", "vram"])
        self.assertEqual((t["vram"]["repeats"], t["vram"]["ok"]), ([1, 2, 3], 3))
        self.assertEqual(t["vram"]["4KiB"], {"median": 1620, "min": 1600, "max": 1700, "n": 3})
        self.assertEqual(t["vram"]["64MiB"], {"median": 1640, "min": 1500, "max": 1700, "n": 3})
        self.assertEqual(t["native"]["1MiB"], {"median": 1925.0, "min": 1900, "max": 1950, "n": 2})
        self.assertEqual((t["async"]["ok"], t["async"]["4KiB"]), (0, None))   # the failed run is no figure
        self.assertIn("1,620 [1,600-1,700]", out)
        dup = self.write("dup.json", doc([], costs=[cost("vram", 2, 1, 1, 1, 1)]))
        rc, _, err = self.main(a, b, dup)
        self.assertEqual(rc, 2)
        self.assertIn("repeat 2 of the per-tensor cost under vram is also in", err)

    def test_the_older_tensor_cost_json_takes_its_gpu_and_commit_from_device_txt(self):
        older = lambda a, r, ns, error=None: {"repeat": r, "allocator": a,  # noqa: E731
                                              "report": {"sizes": {"4KiB": {"median_ns": ns}}, "error": error}}
        folder = self.dir / "older"
        self.write("older/tensor-cost.json", {"runs": [older("vram", 1, 1700), older("vram", 2, 1600),
                                                       older("vram", 3, 1800), older("native", 1, 1950),
                                                       older("native", 2, 0, error="RuntimeError: x")]})
        (folder / "device.txt").write_text("name, driver_version\nNVIDIA H100 80GB HBM3, 580.159.04\n" +
                                           "c" * 40 + "\n")
        rc, out, _ = self.main(str(folder), "--json", str(self.dir / "m.json"))
        self.assertEqual(rc, 0)
        m = json.loads((self.dir / "m.json").read_text())
        self.assertEqual((m["gpu_model"], m["commits"]), ("NVIDIA H100 80GB HBM3", ["c" * 40]))
        self.assertEqual(m["libraries"], ["not recorded"])  # the older loop kept no hash of the library
        self.assertEqual(m["tensor_cost"]["vram"]["4KiB"], {"median": 1700, "min": 1600, "max": 1800, "n": 3})
        # The run whose report names an error is listed, not counted.
        self.assertEqual((m["tensor_cost"]["native"]["repeats"], m["tensor_cost"]["native"]["ok"]), ([1, 2], 1))
        self.assertIn("1,700 [1,600-1,800]", out)
        self.assertNotIn("workload/allocator", out)  # no workload ran: no table of workloads
        # It cannot stand beside an H200's run, and without device.txt it has no GPU to be checked against.
        h200 = self.write("h200.json", doc([], gpu="NVIDIA H200, 580.159.04", costs=[cost("vram", 9, 1, 1, 1, 1)]))
        rc, _, err = self.main(str(folder), h200, "--allow-commits")
        self.assertEqual(rc, 2)
        self.assertIn("different GPU models", err)
        (folder / "device.txt").unlink()
        rc, _, err = self.main(str(folder))
        self.assertEqual(rc, 2)
        self.assertIn("no device.txt beside it", err)

    def test_a_failed_run_is_a_repeat_but_not_a_figure(self):
        # Runs 2-4 failed in three ways, each with figures that would move the medians if they counted.
        errored = run("serving", "vram", 3, steps=900, nvml=900, failures=5)
        errored["report"]["error"] = "CUDA error: out of memory"
        no_report = run("serving", "vram", 4, rc=0)
        no_report["report"] = None
        runs = [run("serving", "vram", 1, steps=100, nvml=10, failures=2),
                run("serving", "vram", 2, steps=700, nvml=700, failures=3, rc=1), errored, no_report]
        bad_cost = cost("vram", 2, 9000, 9000, 9000, 9000)
        bad_cost["report"]["error"] = "no GPU"
        a = self.write("a.json", doc(runs, seconds={"serving": 100.0},
                                     costs=[cost("vram", 1, 1600, 1600, 1600, 1200), bad_cost]))
        rc, out, _ = self.main(a, "--json", str(self.dir / "m.json"))
        self.assertEqual(rc, 0)
        merged = json.loads((self.dir / "m.json").read_text())
        cell = merged["workloads"]["serving"]["allocators"]["vram"]
        self.assertEqual((cell["repeats"], cell["repeats_ok"], cell["ok"], cell["failures"]), ([1, 2, 3, 4], [1], 1, 2))
        self.assertEqual(cell["steps"], {"median": 100, "min": 100, "max": 100, "n": 1})
        self.assertEqual(cell["nvml_peak_bytes"]["max"], 10)
        self.assertRegex(out, r"\nserving/vram +1,2x,3x,4x +100 ")
        self.assertEqual(merged["tensor_cost"]["vram"]["4KiB"], {"median": 1600, "min": 1600, "max": 1600, "n": 1})
        self.assertRegex(out, r"\nvram +1,2x +1,600 ")

    def test_equal_steps_are_as_fast_and_other_repeats_are_said(self):
        runs = [run("serving", "native", r, steps=100, nvml=50) for r in (1, 2, 3)]
        runs += [run("serving", "vram", r, steps=100, nvml=50) for r in (1, 2)]
        rc, out, _ = self.main(self.write("a.json", doc(runs, seconds={"serving": 100.0})),
                               "--json", str(self.dir / "m.json"))
        self.assertEqual(rc, 0)
        v = json.loads((self.dir / "m.json").read_text())["workloads"]["serving"]["vram"]
        self.assertEqual((v["vs_native"], v["at_least_as_fast_as_native"], v["same_repeats_as_native"]),
                         (1.0, True, False))
        self.assertIn("vram on serving (100 seconds a run): device peak at or below every other's (+0 bytes against "
                      "native's); steps 1.000x native's median, within native's range; over other repeats than "
                      "native's", out)

    def test_files_that_cannot_be_put_side_by_side_are_refused(self):
        base = self.write("base.json", self.serving(1, 100, 110, 500, 505))
        cases = {
            "another GPU": (self.serving(2, 1, 1, 1, 1, gpu="NVIDIA H200, 580.159.04, 143771 MiB"),
                            "different GPU models cannot be put side by side: NVIDIA H100 80GB HBM3, NVIDIA H200"),
            "another commit": (self.serving(2, 1, 1, 1, 1, commit="b" * 40),
                               "different commits: aaaaaaaaaaaa, bbbbbbbbbbbb (--allow-commits"),
            "the same repeat": (self.serving(1, 1, 1, 1, 1), "repeat 1 of serving under native is also in"),
            "another length": (doc([run("serving", "native", 2, steps=1)], seconds={"serving": 60.0}),
                               "serving ran for 60 seconds here, 100 seconds elsewhere"),
            "not a benchmark": ({"runs": 3}, "not a torch-bench.json (no 'runs' and 'settings')"),
            "other model sizes": (doc([run("serving", "native", 2, steps=1)], seconds={"serving": 100.0},
                                      opts=["serving:max_batch=32"]),
                                  "run with --opt ['serving:max_batch=32'] and --seed 0, "),
            "another seed": (doc([run("serving", "native", 2, steps=1)], seconds={"serving": 100.0}, seed=7),
                             "run with --opt [] and --seed 7"),
            "a run without a workload": (doc([{"repeat": 2, "allocator": "vram", "rc": 0, "report": {}}]),
                                         "entry 0 of its runs names no allocator, repeat or workload"),
            "a null run": (doc([None]), "entry 0 of its runs names no allocator, repeat or workload"),
            "a report that is a string": (doc([{"repeat": 2, "workload": "serving", "allocator": "vram",
                                                "report": "oops"}]),
                                          "entry 0 of its runs has a report that is not an object"),
            "a length that is no number": (doc([], seconds={"serving": "100s"}),
                                           "settings.seconds is not a table of positive numbers"),
            "null settings": ({"runs": [], "settings": None}, "not a torch-bench.json"),
            "a merged summary": ({"workloads": {}, "gpu_model": "x"},
                                 "a summary merge.py wrote, not a torch-bench.json of run_all.py"),
        }
        for what, (content, message) in cases.items():
            with self.subTest(what):
                other = self.write(f"{what}.json", content)
                rc, out, err = self.main(base, other)
                self.assertEqual((rc, out), (2, ""))
                self.assertIn(message, err)
        (self.dir / "empty").mkdir()
        for path, message in ((self.dir / "empty", "no torch-bench*.json or tensor-cost.json in this folder"),
                              (self.dir / "nothing.json", "no such file or folder")):
            rc, _, err = self.main(str(path))
            self.assertEqual(rc, 2)
            self.assertIn(message, err)
        rc, _, err = self.main(base, "--json", str(self.dir / "no" / "such" / "m.json"))
        self.assertEqual(rc, 2)
        self.assertIn("--json", err)
        (self.dir / "bad.json").write_text("{not json")
        rc, _, err = self.main(str(self.dir / "bad.json"))
        self.assertEqual(rc, 2)
        self.assertIn("bad.json: not a torch-bench.json (", err)

    def test_one_label_with_two_settings_is_refused_and_a_file_that_does_not_say_is_not(self):
        def variant_run(repeat, env, report_env=True):
            r = run("cnn_train", "vram-x", repeat, steps=100, nvml=10)
            r["variant_of"], r["variant_env"] = "vram", env
            if report_env:
                r["report"]["vram_env"] = env
            return r

        def plain(repeat, env):
            r = run("cnn_train", "vram", repeat, steps=100, nvml=10)
            if env is not None:
                r["report"]["vram_env"] = env
            return r

        def write(name, *runs):
            return self.write(name, doc(list(runs), seconds={"cnn_train": 20.0}))

        a = write("a.json", variant_run(1, {"VRAM_THREAD_CACHE": "0"}), plain(1, {}))
        # The label reused for another variant (the runs' variant_env alone, as if no report said).
        b = write("b.json", variant_run(2, {"VRAM_MEMBARRIER": "0"}, report_env=False))
        rc, out, err = self.main(a, b)
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("b.json: vram-x ran with VRAM settings {'VRAM_MEMBARRIER': '0'}, in ", err)
        self.assertIn("a.json with {'VRAM_THREAD_CACHE': '0'}", err)
        # vram with a stray variable in one command's environment.
        c = write("c.json", plain(2, {"VRAM_LIMIT": "1GiB"}))
        rc, _, err = self.main(a, c)
        self.assertEqual(rc, 2)
        self.assertIn("c.json: vram ran with VRAM settings {'VRAM_LIMIT': '1GiB'}, in ", err)
        self.assertIn("a.json with none", err)
        # A file from before the settings were recorded says nothing, and is merged.
        d = write("d.json", plain(2, None), variant_run(2, {"VRAM_THREAD_CACHE": "0"}))
        rc, out, _ = self.main(a, d)
        self.assertEqual(rc, 0)
        self.assertIn("cnn_train/vram                     1,2", out)

    def test_the_gpus_own_time_over_rounds_from_two_files(self):
        a = self.write("a.json", kernel_doc([kernels("cnn_train", "native", 1, 20.0, 18.0, 17.5, 0.3),
                                             kernels("cnn_train", "vram", 1, 20.2, 18.0, 17.6, 0.2),
                                             kernels("cnn_train", "vram-x", 1, 21.0, 18.4, 17.9, 0.25,
                                                     env={"VRAM_THREAD_CACHE": "0"})]))
        # Round 3 of native failed with figures that would move every median: listed, not counted.
        b = self.write("b.json", kernel_doc([kernels("cnn_train", "native", 2, 20.4, 18.2, 17.7, 0.1),
                                             kernels("cnn_train", "vram", 2, 19.8, 18.1, 17.7, 0.4),
                                             kernels("cnn_train", "native", 3, 1.0, 1.0, 1.0, 0.9, rc=1)]))
        rc, out, err = self.main(a, b, "--json", str(self.dir / "m.json"))
        self.assertEqual((rc, err), (0, ""))
        k = json.loads((self.dir / "m.json").read_text())["kernel_time"]["cnn_train"]
        self.assertEqual(k["steps"], 30)
        self.assertEqual(list(k["allocators"]), ["native", "vram", "vram-x"])
        native, vram = k["allocators"]["native"], k["allocators"]["vram"]
        self.assertEqual((native["repeats"], native["repeats_ok"]), ([1, 2, 3], [1, 2]))
        self.assertAlmostEqual(native["step_ms"]["median"], 20.2)
        self.assertEqual((native["step_ms"]["min"], native["step_ms"]["max"]), (20.0, 20.4))
        self.assertAlmostEqual(vram["kernel_ms_per_step"]["median"], 18.05)
        self.assertAlmostEqual(vram["idle_share"]["median"], 0.3)
        # The wait, round by round: native 20.0 - 17.5 = 2.5 and 20.4 - 17.7 = 2.7; vram 2.6 and 2.1.
        self.assertAlmostEqual(native["wait_ms_per_step"]["median"], 2.6)
        self.assertAlmostEqual(native["wait_ms_per_step"]["min"], 2.5)
        self.assertAlmostEqual(vram["wait_ms_per_step"]["median"], 2.35)
        self.assertAlmostEqual(vram["wait_ms_per_step"]["max"], 2.6)
        # vram's medians over native's: 20.0 / 20.2, 18.05 / 18.1, 17.65 / 17.6.
        self.assertAlmostEqual(k["vs_native"]["vram"]["step_ms"], 20.0 / 20.2)
        self.assertAlmostEqual(k["vs_native"]["vram"]["kernel_ms_per_step"], 18.05 / 18.1)
        self.assertAlmostEqual(k["vs_native"]["vram"]["busy_ms_per_step"], 17.65 / 17.6)
        self.assertAlmostEqual(k["vs_native"]["vram-x"]["step_ms"], 21.0 / 20.2)
        self.assertNotIn("native", k["vs_native"])
        self.assertIn("(30 steps profiled a round)", out)
        self.assertRegex(out, r"\ncnn_train/native +1,2,3x +20\.200 \[20\.000-20\.400\] +18\.100 \[18\.000-18\.200\] "
                              r"+17\.600 \[17\.500-17\.700\] +2\.600 \[2\.500-2\.700\]\n")
        self.assertIn("  vram on cnn_train against native (medians): step 0.9901x, kernels 0.9972x, busy 1.0028x", out)
        self.assertIn("  vram-x on cnn_train against native (medians): step 1.0396x, kernels 1.0166x, busy 1.0170x", out)

    def test_kernel_time_files_that_cannot_be_merged_are_refused(self):
        a = self.write("a.json", kernel_doc([kernels("cnn_train", "native", 1, 20.0, 18.0, 17.5, 0.3),
                                             kernels("cnn_train", "vram-x", 1, 21.0, 18.4, 17.9, 0.25,
                                                     env={"VRAM_THREAD_CACHE": "0"})]))
        no_steps = kernel_doc([kernels("cnn_train", "native", 2, 20.0, 18.0, 17.5, 0.3)])
        del no_steps["settings"]["kernel_time_steps"]
        nameless = kernel_doc([kernels("cnn_train", "native", 2, 20.0, 18.0, 17.5, 0.3)])
        del nameless["kernel_time"][0]["workload"]
        not_a_list = kernel_doc([])
        not_a_list["kernel_time"] = {"cnn_train": 1}
        cases = {
            "other steps": (kernel_doc([kernels("cnn_train", "native", 2, 20.0, 18.0, 17.5, 0.3)], steps=40),
                            "the GPU's time in cnn_train was taken over 40 steps here, 30 in "),
            "the same round": (kernel_doc([kernels("cnn_train", "native", 1, 20.0, 18.0, 17.5, 0.3)]),
                               "round 1 of the GPU's time in cnn_train under native is also in "),
            "no step count": (no_steps, "it has kernel_time runs but no positive settings.kernel_time_steps"),
            "no workload": (nameless, "entry 0 of its kernel_time names no allocator, repeat or workload"),
            "not a list": (not_a_list, "its kernel_time is not a list"),
            "other settings": (kernel_doc([kernels("cnn_train", "vram-x", 2, 21.0, 18.4, 17.9, 0.25,
                                                   env={"VRAM_MEMBARRIER": "0"})]),
                               "vram-x ran with VRAM settings {'VRAM_MEMBARRIER': '0'}, in "),
        }
        for what, (content, message) in cases.items():
            with self.subTest(what):
                rc, out, err = self.main(a, self.write("b.json", content))
                self.assertEqual((rc, out), (2, ""))
                self.assertIn(message, err)

    def test_commits_that_share_the_pool_are_merged_when_allowed(self):
        a = self.write("a.json", self.serving(1, 100, 110, 500, 505))
        b = self.write("b.json", self.serving(2, 120, 130, 520, 509, commit="b" * 40))
        rc, out, _ = self.main(a, b, "--allow-commits")
        self.assertEqual(rc, 0)
        self.assertIn("commits: aaaaaaaaaaaa, bbbbbbbbbbbb; libvram sha256: aaaa-lib, bbbb-lib; 2 files", out)

    def test_the_commit_asked_for_is_the_runs_commit(self):
        # b's copy named commit b but was asked to be a (.gpubuild/commit): one commit, no --allow-commits.
        asked = self.serving(2, 120, 130, 520, 509, commit="b" * 40)
        asked["git_asked"] = "a" * 40
        a = self.write("a.json", self.serving(1, 100, 110, 500, 505))
        b = self.write("b.json", asked)
        rc, out, err = self.main(a, b)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("commits: aaaaaaaaaaaa; ", out)
        # asked for c where a was run: two commits, refused as any two are.
        asked["git_asked"] = "c" * 40
        rc, _, err = self.main(a, self.write("c.json", asked))
        self.assertEqual(rc, 2)
        self.assertIn("different commits: aaaaaaaaaaaa, cccccccccccc (--allow-commits", err)


if __name__ == "__main__":
    unittest.main()
