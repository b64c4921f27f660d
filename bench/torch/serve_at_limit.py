#!/usr/bin/env python3
"""The serving workload with each allocator held to ratio x its peak live bytes, all four at once.

    serve_at_limit.py --out DIR [--seconds 600] [--ratio 1.05] [--period 1000]

1. Calibration: one period of the seeded request sequence (it repeats every --period requests) under
   vram, and at the same time under native; peak live = vram's allocated_bytes.all.peak (native's
   max_memory_allocated where vram's run failed). --peak-live BYTES gives a figure measured before instead.
2. limit = ratio x peak live. The four allocators run the serving workload at the same time, as four
   processes on the one GPU, each held to `limit`, for --seconds each.
3. For each: whether and when it first failed, how often, the device's free share at the first failure,
   the requests served. DIR/serve-at-limit.json and a table.
"""
import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import allocators  # noqa: E402


def start(alloc, extra, json_path, log_path):
    cmd = [sys.executable, str(HERE / "run_one.py"), "--workload", "serving", "--allocator", alloc,
           "--json", str(json_path)] + extra
    json_path.unlink(missing_ok=True)
    log = open(log_path, "w")
    try:
        proc = subprocess.Popen(cmd, env=allocators.child_env(alloc), stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(HERE))
    except Exception as e:  # noqa: BLE001
        log.write(f"launch failed: {e}\n")
        proc = None
    log.close()
    return {"cmd": " ".join(cmd[1:]), "proc": proc, "json": json_path, "log": log_path}


def last_lines(path, n):
    try:
        return Path(path).read_text(errors="replace").splitlines()[-n:]
    except Exception:  # noqa: BLE001
        return []


def wait_all(children, deadline, progress_every=None):
    """Waits for every child until `deadline` (perf_counter); kills the ones still running then."""
    next_print = time.perf_counter() + (progress_every + 10 if progress_every else 1e9)
    while any(c["proc"] is not None and c["proc"].poll() is None for c in children.values()):
        now = time.perf_counter()
        if now >= deadline:
            for c in children.values():
                if c["proc"] is not None and c["proc"].poll() is None:
                    c["proc"].kill()
                    c["killed"] = True
            break
        if now >= next_print:
            next_print = now + progress_every
            for name, c in children.items():
                tail = last_lines(c["log"], 1)
                print(f"  {name:10} {tail[0] if tail else '(no output yet)'}", flush=True)
        time.sleep(1)
    for name, c in children.items():
        if c["proc"] is not None:
            try:
                c["proc"].wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        c["rc"] = None if c["proc"] is None else c["proc"].returncode
        try:
            c["report"] = json.loads(Path(c["json"]).read_text())
        except Exception:  # noqa: BLE001
            c["report"] = None
        if c["rc"] != 0 or c["report"] is None:
            c["log_tail"] = last_lines(c["log"], 30)
    return {name: {k: v for k, v in c.items() if k not in ("proc", "json", "log")} | {"log": str(c["log"])}
            for name, c in children.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work-dir", default=None, help="the children's reports and logs (default: a temp dir)")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--ratio", type=float, default=1.05)
    ap.add_argument("--period", type=int, default=1000, help="requests before the sequence repeats")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--allocators", nargs="+", default=list(allocators.NAMES), choices=allocators.NAMES)
    ap.add_argument("--calibration-timeout-s", type=float, default=180)
    ap.add_argument("--peak-live", type=int, default=None,
                    help="peak live bytes measured before (a calibration's figure): skip the calibration")
    ap.add_argument("--opt", action="append", default=[], help="serving size, key=value (repeatable)")
    args = ap.parse_args()
    if args.peak_live is not None and args.peak_live <= 0:
        ap.error(f"--peak-live must be a positive number of bytes, not {args.peak_live}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="serve-at-limit-"))
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    opts = [x for o in args.opt + [f"period={args.period}"] for x in ("--opt", o)]
    common = ["--seed", str(args.seed)] + opts
    doc = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "settings": {"seconds": args.seconds, "ratio": args.ratio, "period": args.period, "seed": args.seed,
                        "allocators": args.allocators, "opts": args.opt},
           "calibration": {}, "peak_live_bytes": None, "peak_live_source": None, "limit_bytes": None, "runs": {}}

    def save():
        doc["elapsed_s"] = time.perf_counter() - t_start
        (out / "serve-at-limit.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")

    if args.peak_live is not None:
        doc["peak_live_bytes"], doc["peak_live_source"] = args.peak_live, "--peak-live (no calibration)"
    else:
        print(f"calibration: {args.period} requests under vram and native (children's files in {work})", flush=True)
        calib = {a: start(a, ["--steps", str(args.period), "--warmup", "0"] + common,
                          work / f"calib-{a}.json", work / f"calib-{a}.log") for a in ("vram", "native")}
        doc["calibration"] = wait_all(calib, time.perf_counter() + args.calibration_timeout_s)
        for a, key in (("vram", "allocator_peak_allocated_bytes"), ("native", "allocator_peak_allocated_bytes")):
            rep = doc["calibration"][a].get("report") or {}
            print(f"  {a}: rc={doc['calibration'][a]['rc']} peak allocated={rep.get(key)} "
                  f"wall_s={rep.get('wall_s')} error={rep.get('error')}", flush=True)
            if doc["peak_live_bytes"] is None and rep.get(key) and not rep.get("error"):
                doc["peak_live_bytes"], doc["peak_live_source"] = int(rep[key]), f"{a} {key}"
    if doc["peak_live_bytes"] is None:
        doc["error"] = "calibration failed: no peak live figure"
        save()
        print(doc["error"], flush=True)
        sys.exit(1)
    limit = int(args.ratio * doc["peak_live_bytes"])
    doc["limit_bytes"] = limit
    save()

    print(f"peak live {doc['peak_live_bytes'] / 2**30:.3f} GiB ({doc['peak_live_source']}); limit {limit / 2**30:.3f} "
          f"GiB; {len(args.allocators)} allocators at once for {args.seconds:.0f} s", flush=True)
    extra = ["--seconds", str(args.seconds), "--limit-bytes", str(limit), "--progress"] + common
    runs = {a: start(a, extra, work / f"limit-{a}.json", work / f"limit-{a}.log") for a in args.allocators}
    doc["runs"] = wait_all(runs, time.perf_counter() + args.seconds + 75, progress_every=30)
    save()

    print(f"\n{'allocator':10} {'rc':>7} {'requests':>9} {'ok':>9} {'failures':>8} {'1st fail s':>10} "
          f"{'free share':>10} {'nvml peak GiB':>13}  error")
    for a, c in doc["runs"].items():
        r = c.get("report") or {}
        first = r.get("first_failure_s")
        if first is None and r.get("error_s") is not None:
            first = r["error_s"]
        share = r.get("free_share_at_first_failure")
        peak = r.get("nvml_peak_bytes")
        print(f"{a:10} {str(c.get('rc')):>7} {str(r.get('steps', '-')):>9} {str(r.get('steps_ok', '-')):>9} "
              f"{str(r.get('failures', '-')):>8} {'-' if first is None else f'{first:.1f}':>10} "
              f"{'-' if share is None else f'{share:.3f}':>10} "
              f"{'-' if peak is None else f'{peak / 2**30:.2f}':>9} ({r.get('nvml_measure', '-')})  "
              f"{(r.get('error') or '')[:80]}")
    print(f"\nwritten to {out / 'serve-at-limit.json'} in {doc['elapsed_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
