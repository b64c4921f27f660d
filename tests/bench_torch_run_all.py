#!/usr/bin/env python3
"""bench/torch/run_all.py's schedule without a GPU or torch: the children are replaced by a stub that
records what it was asked and answers with a report, so that what is checked is which runs start, in
which order, with which arguments and time limits, and what the JSON says of them."""
import contextlib
import io
import json
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "torch"))
import run_all  # noqa: E402


class Schedule(unittest.TestCase):
    def run_main(self, *args):
        calls, envs = [], []
        self.envs = envs

        def fake_child(script, alloc, extra, json_path, timeout, env=None):
            calls.append((script, alloc, list(extra), timeout))
            envs.append(env)
            if script == "kernel_time.py":   # figures that grow by one with each call, to check the medians
                n = len(calls)
                return {"cmd": script, "rc": 0, "elapsed_s": 1.0,
                        "report": {"step_ms": 20.0 + n, "kernel_ms_per_step": 10.0 + n, "busy_ms_per_step": 9.0 + n,
                                   "span_ms_per_step": 20.0 + n, "idle_share": n / 100}}
            return {"cmd": script, "rc": 0, "elapsed_s": 1.0,
                    "report": {"wall_s": 1.0, "step_ms_median": 2.0, "nvml_peak_bytes": 100}}

        out = tempfile.mkdtemp(prefix="run_all_test-")
        saved, run_all.run_child = run_all.run_child, fake_child
        saved_argv = sys.argv
        sys.argv = ["run_all.py", "--out", out, "--work-dir", out + "/work"] + list(args)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run_all.main()
            doc = json.loads((Path(out) / "torch-bench.json").read_text())
        finally:
            run_all.run_child, sys.argv = saved, saved_argv
            shutil.rmtree(out, ignore_errors=True)
        return calls, doc

    def test_a_timed_workload_from_the_third_repeat_turns_the_order_as_repeats_three_and_four(self):
        calls, doc = self.run_main("--repeats", "2", "--first-repeat", "3", "--workloads", "serving",
                                   "--seconds-per-workload", "serving=100", "--tensor-cost-repeats", "0",
                                   "--budget-s", "100000", "--run-timeout-s", "90")
        # Repeat r starts at allocator (r - 1) mod 4 of native, expandable, async, vram.
        self.assertEqual([c[1] for c in calls], ["async", "vram", "native", "expandable",
                                                 "vram", "native", "expandable", "async"])
        for script, _, extra, timeout in calls:
            self.assertEqual(script, "run_one.py")
            self.assertEqual(extra, ["--workload", "serving", "--seconds", "100.0", "--seed", "0"])
            self.assertEqual(timeout, 190.0)  # the run's own 100 s on top of --run-timeout-s
        self.assertEqual([r["repeat"] for r in doc["runs"]], [3, 3, 3, 3, 4, 4, 4, 4])
        self.assertEqual(doc["settings"]["seconds"], {"serving": 100.0})
        self.assertEqual(doc["settings"]["steps"], {})
        self.assertEqual(doc["settings"]["first_repeat"], 3)
        self.assertEqual(doc["tensor_cost"], [])

    def test_counted_steps_and_the_tensor_cost_in_the_first_repeat_only(self):
        calls, doc = self.run_main("--repeats", "2", "--workloads", "cnn_train", "serving",
                                   "--steps-per-workload", "cnn_train=7", "--seconds-per-workload", "serving=5",
                                   "--tensor-cost-repeats", "1", "--budget-s", "100000", "--run-timeout-s", "60")
        runs = [(c[1], c[2][1], c[2][2], c[2][3], c[3]) for c in calls if c[0] == "run_one.py"]
        order1, order2 = ["native", "expandable", "async", "vram"], ["expandable", "async", "vram", "native"]
        expected = ([(a, "cnn_train", "--steps", "7", 60.0) for a in order1] +
                    [(a, "serving", "--seconds", "5.0", 65.0) for a in order1] +
                    [(a, "cnn_train", "--steps", "7", 60.0) for a in order2] +
                    [(a, "serving", "--seconds", "5.0", 65.0) for a in order2])
        self.assertEqual(runs, expected)
        # tensor_cost.py after the first repeat's runs, in its order; none after the second.
        self.assertEqual([(c[0], c[1]) for c in calls[8:12]], [("tensor_cost.py", a) for a in order1])
        self.assertEqual(len(calls), 20)
        self.assertEqual(doc["settings"]["steps"], {"cnn_train": 7})
        self.assertEqual(doc["settings"]["seconds"], {"serving": 5.0})

    def test_no_workload_runs_only_the_tensor_cost_in_each_repeats_order(self):
        calls, doc = self.run_main("--repeats", "3", "--first-repeat", "2", "--workloads",
                                   "--tensor-cost-repeats", "3", "--budget-s", "100000")
        self.assertEqual([(c[0], c[1]) for c in calls],
                         [("tensor_cost.py", a) for a in ["expandable", "async", "vram", "native",
                                                          "async", "vram", "native", "expandable",
                                                          "vram", "native", "expandable", "async"]])
        self.assertEqual(doc["runs"], [])
        self.assertEqual([c["repeat"] for c in doc["tensor_cost"]], [2] * 4 + [3] * 4 + [4] * 4)
        self.assertEqual(doc["settings"]["workloads"], [])
        self.assertEqual(doc["tensor_cost_summary"]["vram"]["ok"], 3)

    def test_a_run_that_would_pass_the_budget_is_skipped(self):
        # The first guess of a timed run is 15 s plus its seconds: 1,000 s cannot start within a 500 s budget.
        calls, doc = self.run_main("--repeats", "1", "--workloads", "serving", "--seconds-per-workload",
                                   "serving=1000", "--tensor-cost-repeats", "0", "--budget-s", "500")
        self.assertEqual(calls, [])
        self.assertEqual(len(doc["skipped"]), 4)

    def test_a_variant_is_vram_with_its_settings_and_an_allocator_of_its_own_in_the_order(self):
        calls, doc = self.run_main("--repeats", "2", "--first-repeat", "2", "--workloads", "cnn_train",
                                   "--allocators", "native", "vram", "--seconds-per-workload", "cnn_train=20",
                                   "--variant", "vram-notc:VRAM_THREAD_CACHE=0",
                                   "--variant", "vram-big:VRAM_SMALL_HANDLE=0,VRAM_MAX_HANDLE=128MiB",
                                   "--tensor-cost-repeats", "1", "--budget-s", "100000")
        # Labels native, vram, vram-notc, vram-big; repeat 2 starts at the second, repeat 3 at the third.
        runs = [r for r in calls if r[0] == "run_one.py"]
        self.assertEqual([c[1] for c in runs], ["vram", "vram", "vram", "native", "vram", "vram", "native", "vram"])
        notc, big = {"VRAM_THREAD_CACHE": "0"}, {"VRAM_SMALL_HANDLE": "0", "VRAM_MAX_HANDLE": "128MiB"}
        run_envs = [e for c, e in zip(calls, self.envs) if c[0] == "run_one.py"]
        self.assertEqual(run_envs, [None, notc, big, None, notc, big, None, None])
        self.assertEqual(self.envs[4:8], [None, notc, big, None])  # the tensor cost's
        self.assertEqual([r["allocator"] for r in doc["runs"]],
                         ["vram", "vram-notc", "vram-big", "native", "vram-notc", "vram-big", "native", "vram"])
        self.assertEqual([r.get("variant_env") for r in doc["runs"][:3]], [None, notc, big])
        self.assertEqual(doc["runs"][1]["variant_of"], "vram")
        # The tensor cost after repeat 2's runs, every label in its order, the variants with their settings.
        self.assertEqual([(c[0], c[1]) for c in calls[4:8]], [("tensor_cost.py", "vram")] * 3 + [("tensor_cost.py", "native")])
        self.assertEqual([r["allocator"] for r in doc["tensor_cost"]], ["vram", "vram-notc", "vram-big", "native"])
        self.assertEqual(doc["settings"]["variants"], {"vram-notc": notc, "vram-big": big})
        self.assertEqual(doc["settings"]["allocators"], ["native", "vram", "vram-notc", "vram-big"])
        self.assertEqual(sorted(doc["summary"]), ["cnn_train/native", "cnn_train/vram", "cnn_train/vram-big",
                                                  "cnn_train/vram-notc"])
        self.assertEqual(doc["summary"]["cnn_train/vram-big"]["ok"], 2)
        self.assertEqual(doc["summary"]["cnn_train/vram-big"]["wall_vs_native"], 1.0)

    def test_kernel_time_alone_runs_each_allocator_on_each_workload_in_the_repeats_order(self):
        calls, doc = self.run_main("--repeats", "2", "--first-repeat", "3", "--workloads", "cnn_train", "serving",
                                   "--allocators", "native", "vram", "--variant", "vram-notc:VRAM_THREAD_CACHE=0",
                                   "--seconds-per-workload", "serving=100", "--kernel-time-steps", "30",
                                   "--kernel-time-only", "--tensor-cost-repeats", "0", "--budget-s", "100000",
                                   "--run-timeout-s", "60")
        # Labels native, vram, vram-notc: repeat 3 starts at the third, repeat 4 at the first.
        self.assertEqual([(c[0], c[1], c[2][1]) for c in calls],
                         [("kernel_time.py", a, w) for a, w in
                          [("vram", "cnn_train"), ("native", "cnn_train"), ("vram", "cnn_train"),
                           ("vram", "serving"), ("native", "serving"), ("vram", "serving"),
                           ("native", "cnn_train"), ("vram", "cnn_train"), ("vram", "cnn_train"),
                           ("native", "serving"), ("vram", "serving"), ("vram", "serving")]])
        for c in calls:
            self.assertEqual(c[2][2:], ["--steps", "30", "--seed", "0"])
            self.assertEqual(c[3], 60.0)   # a workload's seconds are run_one.py's, not kernel_time.py's
        self.assertEqual(doc["runs"], [])
        self.assertEqual([r["allocator"] for r in doc["kernel_time"][:3]], ["vram-notc", "native", "vram"])
        self.assertEqual(doc["kernel_time"][0]["variant_env"], {"VRAM_THREAD_CACHE": "0"})
        # serving under native: calls 5 and 10, so kernel ms 15 and 20, median 17.5; idle 0.05 and 0.10.
        k = doc["kernel_time_summary"]["serving/native"]
        self.assertEqual((k["ok"], k["kernel_ms_per_step"], k["step_ms"]), (2, 17.5, 27.5))
        self.assertAlmostEqual(k["idle_share"], 0.075)
        self.assertEqual(sorted(doc["kernel_time_summary"]), ["cnn_train/native", "cnn_train/vram",
                                                              "cnn_train/vram-notc", "serving/native",
                                                              "serving/vram", "serving/vram-notc"])
        self.assertEqual(doc["settings"]["kernel_time_steps"], 30)

    def test_kernel_time_follows_each_workloads_runs(self):
        calls, doc = self.run_main("--repeats", "1", "--workloads", "cnn_train", "--allocators", "native", "vram",
                                   "--steps-per-workload", "cnn_train=7", "--kernel-time-steps", "5",
                                   "--tensor-cost-repeats", "1", "--budget-s", "100000")
        self.assertEqual([(c[0], c[1]) for c in calls],
                         [("run_one.py", "native"), ("run_one.py", "vram"), ("kernel_time.py", "native"),
                          ("kernel_time.py", "vram"), ("tensor_cost.py", "native"), ("tensor_cost.py", "vram")])
        self.assertEqual(len(doc["runs"]), 2)
        self.assertEqual(doc["kernel_time_summary"]["cnn_train/vram"]["kernel_ms_per_step"], 14.0)

    def test_no_kernel_time_leaves_no_trace_of_it(self):
        _, doc = self.run_main("--repeats", "1", "--workloads", "serving", "--steps-per-workload", "serving=3",
                               "--tensor-cost-repeats", "0", "--budget-s", "100000")
        self.assertNotIn("kernel_time", doc)
        self.assertEqual(doc["settings"]["kernel_time_steps"], 0)

    def test_bad_arguments_are_refused(self):
        for bad in (["--seconds-per-workload", "sorting=10"], ["--seconds-per-workload", "serving=0"],
                    ["--seconds-per-workload", "serving=ten"], ["--seconds-per-workload", "serving=nan"],
                    ["--first-repeat", "0"], ["--variant", "vram"], ["--variant", "native:VRAM_THREAD_CACHE=0"],
                    ["--variant", "x:THREAD_CACHE=0"], ["--variant", "x:VRAM_LIBRARY=/tmp/l.so"],
                    ["--variant", "x:VRAM_THREAD_CACHE"], ["--variant", "x:VRAM_THREAD_CACHE="],
                    ["--variant", "a/b:VRAM_THREAD_CACHE=0"],
                    ["--variant", "x:VRAM_THREAD_CACHE=0", "--variant", "x:VRAM_MEMBARRIER=0"],
                    ["--kernel-time-only"], ["--kernel-time-steps", "-1"]):
            with self.subTest(bad=bad), contextlib.redirect_stderr(io.StringIO()):
                with self.assertRaises(SystemExit) as e:
                    self.run_main(*bad)
                self.assertEqual(e.exception.code, 2)


class KernelTime(unittest.TestCase):
    def test_the_gpu_time_of_a_profiler_trace_per_step(self):
        import kernel_time
        events = [
            {"ph": "X", "cat": "kernel", "name": "conv", "ts": 0, "dur": 10},
            {"ph": "X", "cat": "kernel", "name": "relu", "ts": 5, "dur": 7},      # overlaps conv: busy to 12
            {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD", "ts": 20, "dur": 5},
            {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "ts": 0, "dur": 100},   # the host's: not counted
            {"ph": "i", "cat": "kernel", "name": "marker", "ts": 30},                    # no duration
            {"ph": "X", "cat": "Kernel", "name": "conv", "ts": 40, "dur": "bad"},        # unreadable
            "not an event",
        ]
        g = kernel_time.gpu_time(events, steps=2)
        # Durations 10 + 7 + 5 = 22 us over 2 steps; busy [0, 12] and [20, 25], 17 us; span 0 to 25 us.
        self.assertEqual(g["gpu_events"], 3)
        self.assertAlmostEqual(g["kernel_ms_per_step"], 0.011)
        self.assertAlmostEqual(g["busy_ms_per_step"], 0.0085)
        self.assertAlmostEqual(g["span_ms_per_step"], 0.0125)
        self.assertAlmostEqual(g["idle_share"], 0.32)
        self.assertEqual(g["top_kernels"], [{"name": "conv", "count": 1, "total_us": 10.0},
                                            {"name": "relu", "count": 1, "total_us": 7.0},
                                            {"name": "Memcpy DtoD", "count": 1, "total_us": 5.0}])

    def test_a_trace_with_no_gpu_activity_has_no_figures(self):
        import kernel_time
        g = kernel_time.gpu_time([{"ph": "X", "cat": "cpu_op", "name": "x", "ts": 0, "dur": 1}], steps=3)
        self.assertEqual((g["gpu_events"], g["kernel_ms_per_step"], g["idle_share"], g["top_kernels"]),
                         (0, None, None, []))


class VramEnv(unittest.TestCase):
    def test_the_pool_settings_of_an_environment_without_the_library_path(self):
        import allocators
        env = {"VRAM_THREAD_CACHE": "0", "VRAM_LIBRARY": "/x/libvram.so", "PATH": "/bin", "VRAM_LIMIT": "4GiB",
               "XVRAM_A": "1"}
        self.assertEqual(allocators.vram_env(env), {"VRAM_LIMIT": "4GiB", "VRAM_THREAD_CACHE": "0"})
        self.assertEqual(allocators.vram_env({"PATH": "/bin"}), {})


@contextlib.contextmanager
def repo_folder(prefix):
    """An empty folder that run_all.py takes for the repository while the block runs."""
    import allocators
    repo = Path(tempfile.mkdtemp(prefix=prefix))
    saved = allocators.REPO
    try:
        allocators.REPO = repo
        yield repo
    finally:
        allocators.REPO = saved
        shutil.rmtree(repo, ignore_errors=True)


class GitChanged(unittest.TestCase):
    def test_the_tracked_files_that_differ_from_the_commit_named(self):
        import subprocess
        with repo_folder("run_all_git-") as repo:
            self.assertIsNone(run_all.git_changed(None))        # no git metadata
            head = lambda: run_all.sh(["git", "-C", str(repo), "rev-parse", "HEAD"])  # noqa: E731
            self.assertIsNone(head())
            git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run(git + ["init", "-q"], check=True)
            (repo / "a.txt").write_text("a\n")
            (repo / "b.txt").write_text("b\n")
            subprocess.run(git + ["add", "a.txt", "b.txt"], check=True)
            subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
            self.assertEqual(run_all.git_changed(head()), [])
            (repo / "b.txt").write_text("changed\n")           # as a tree checked out at another commit
            (repo / "new.txt").write_text("untracked\n")        # not tracked: not counted
            self.assertEqual(run_all.git_changed(head()), ["b.txt"])


class GitAsked(unittest.TestCase):
    def test_the_commit_named_in_gpubuild_where_it_is_another(self):
        with repo_folder("run_all_asked-") as repo:
            head, other = "a" * 40, "f" * 40
            self.assertIsNone(run_all.git_asked(head))          # no .gpubuild/commit
            (repo / ".gpubuild").mkdir()
            (repo / ".gpubuild" / "commit").write_text("")
            self.assertIsNone(run_all.git_asked(head))          # empty
            (repo / ".gpubuild" / "commit").write_text(head + "\n")
            self.assertIsNone(run_all.git_asked(head))          # the commit the copy has
            (repo / ".gpubuild" / "commit").write_text(other + "\n")
            self.assertEqual(run_all.git_asked(head), other)
            self.assertEqual(run_all.git_asked(None), other)    # a copy without git metadata


class BuildHeader(unittest.TestCase):
    """bench/build-header.sh, which every GPU run's 1-build.txt starts with."""

    def header(self, repo):
        import os
        import subprocess
        script = Path(__file__).resolve().parents[1] / "bench" / "build-header.sh"
        smi = repo.parent / (repo.name + "-bin")
        smi.mkdir()
        (smi / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 580.95.05, 81559 MiB'\n")
        (smi / "nvidia-smi").chmod(0o755)
        env = dict(os.environ, PATH=f"{smi}:{os.environ['PATH']}")
        out = subprocess.run(["bash", "-c", f"source {script}; build_header"], cwd=repo, env=env,
                             capture_output=True, text=True, check=True).stdout
        shutil.rmtree(smi)
        return [line.split(None, 1) for line in out.splitlines()]

    def test_commit_changed_files_and_the_commit_asked_for(self):
        import subprocess
        repo = Path(tempfile.mkdtemp(prefix="build_header-"))
        try:
            lines = self.header(repo)                         # no git metadata
            self.assertEqual([w[0] for w in lines], ["date:", "commit:", "NVIDIA"])
            self.assertEqual(lines[1][1], "(no git metadata in this copy)")
            git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
            subprocess.run(git + ["init", "-q"], check=True)
            (repo / "a.txt").write_text("a\n")
            subprocess.run(git + ["add", "a.txt"], check=True)
            subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
            head = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
            lines = self.header(repo)                         # clean, nothing asked: no changed or asked line
            self.assertEqual([w[0] for w in lines], ["date:", "commit:", "NVIDIA"])
            self.assertEqual(lines[1][1], head)
            self.assertEqual(lines[2][1], "H100 80GB HBM3, 580.95.05, 81559 MiB")
            (repo / ".gpubuild").mkdir()
            (repo / ".gpubuild" / "commit").write_text(head + "\n")  # asked for the commit it has: no line
            self.assertEqual([w[0] for w in self.header(repo)], ["date:", "commit:", "NVIDIA"])
            other = "f" * 40
            (repo / ".gpubuild" / "commit").write_text(other + "\n")
            (repo / "a.txt").write_text("another commit's a\n")
            lines = self.header(repo)
            self.assertEqual([w[0] for w in lines], ["date:", "commit:", "changed:", "asked:", "NVIDIA"])
            self.assertTrue(lines[2][1].startswith("1 tracked files differ"))
            self.assertTrue(lines[3][1].startswith(other + " (.gpubuild/commit"))
        finally:
            shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
