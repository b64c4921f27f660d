"""vram report's page in a real browser: headless Chromium opens it from disk, and the page's own account of
what it drew (its self-check) must match `vram replay --json` for the same traces, policies and device:
one chart series for live bytes and one per policy, each with the replay's exact peak; a map per policy at
the moment shown; a sentence per policy that failed; the trade-off curve's seven points; no error in the
console. A screenshot is saved beside the page for people to look at. The page is checked twice: as built
(with the chart library where the build has it) and with --static charts.

Run by ctest (report_browser):  python3 tests/report_browser.py VRAM SOURCE_DIR WORK_DIR
Exits 77 (skipped) where no Chromium is installed, unless VRAM_REQUIRE_BROWSER=1 (scripts/test sets it)."""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

POLICIES = ["vram", "torch-native", "cuda-direct"]
DEVICE = "sim:5.5GiB"  # small enough that cuda-direct fails on vit_train (its fit is 5.82 GiB)
DEVICE_SHOWN = "5.50 GiB"  # the page's words for it
# A free of a block freed already: the replays skip it, and the page says so.
DOUBLE_FREE = ("time_us,action,addr,size,stream\n0,alloc,4096,1048576,0\n10,free_requested,4096,1048576,0\n"
               "20,free_requested,4096,1048576,0\n")


def chromium():
    for name in (os.environ.get("VRAM_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def browser(binary, *args):
    """Runs headless Chromium with a fresh profile and no network chatter; returns (stdout, stderr)."""
    with tempfile.TemporaryDirectory() as profile:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", *args]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise SystemExit(f"chromium exited {p.returncode}: {p.stderr[-2000:]}")
        return p.stdout, p.stderr


def self_check(dom):
    m = re.search(r'<pre id="vram-self-check"[^>]*>(.*?)</pre>', dom, re.S)
    if not m or not m.group(1).strip():
        raise SystemExit("the page wrote no self-check: its script did not run to the end")
    return json.loads(html.unescape(m.group(1)))


def expect(cond, what, failures):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def check_page(binary, vram, page, traces, static, failures):
    command = [vram, "report", *traces, "-p", ",".join(POLICIES), "--device", DEVICE, "-o", page,
               *(["--static"] if static else [])]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"vram report exited {out.returncode}: {out.stderr}")
    print(out.stdout.strip())
    interactive = "charts interactive" in out.stdout
    data = {t["name"]: t for t in json.loads(subprocess.run(command + ["--json"], capture_output=True, text=True,
                                                            check=True).stdout)["traces"]}
    replay = subprocess.run([vram, "replay", *traces, "-p", ",".join(POLICIES), "--device", DEVICE, "--json",
                             "--allow-failures"], capture_output=True, text=True, check=True)
    results = json.loads(replay.stdout)

    dom, log = browser(binary, "--dump-dom", "file://" + os.path.abspath(page))
    check = self_check(dom)
    print(f"page: rendered in {check['render_ms']:.0f} ms after navigation (chart library: {check['chart_library']})")
    expect(check["errors"] == [], f"no errors in the page: {check['errors']}", failures)
    console = [l for l in log.splitlines() if "CONSOLE" in l and ("Uncaught" in l or "rror" in l)]
    expect(console == [], f"no console errors in Chromium's log: {console[:3]}", failures)
    expect((check["chart_library"] is not None) == interactive,
           f"the chart library is in the page exactly when vram says so ({interactive})", failures)
    expect(len(check["traces"]) == len(traces), f"{len(traces)} traces drawn", failures)
    captions = captions_by_policy(dom, [t["name"] for t in check["traces"]])
    shown_pages = [0]
    for drawn in check["traces"]:
        rows = [r for r in results if r["trace"] == drawn["name"]]
        expect(drawn["series"] == 1 + len(POLICIES) and drawn["drawn"] == 1 + len(POLICIES),
               f"{drawn['name']}: {1 + len(POLICIES)} series in the chart (got {drawn['series']}, drew {drawn['drawn']})",
               failures)
        base = min(rows, key=lambda r: r["failed_allocations"])  # the live series comes from the fewest failures
        expect(drawn["peaks"].get("live") == base["peak_live_bytes"],
               f"{drawn['name']}: live peaks at {base['peak_live_bytes']} bytes (drawn {drawn['peaks'].get('live')})",
               failures)
        for r in rows:
            key = r["policy"] + " reserved"
            expect(drawn["peaks"].get(key) == r["peak_reserved_bytes"],
                   f"{drawn['name']}: {key} peaks at {r['peak_reserved_bytes']} (drawn {drawn['peaks'].get(key)})",
                   failures)
        failed = sum(1 for r in rows if r["failed_allocations"] > 0)
        expect(drawn["failures"] == failed, f"{drawn['name']}: {failed} failure sentences (got {drawn['failures']})",
               failures)
        fits = ["not run" if "fit_bytes" not in r else
                f"none up to {DEVICE_SHOWN}" if r["fit_bytes"] is None else None
                for r in data[drawn["name"]]["results"]]
        expect(all(want is None or want == got for want, got in zip(fits, drawn["fits"])) and
               len(drawn["fits"]) == len(POLICIES),
               f"{drawn['name']}: a policy that fits on no size tried says so ({drawn['fits']})", failures)
        unmatched = max(r["unmatched_frees"] for r in rows)
        expect(drawn["unmatched_said"] == unmatched,
               f"{drawn['name']}: {unmatched} rows that match no block, said on the page (said {drawn['unmatched_said']})",
               failures)
        expect(drawn["maps"] == len(POLICIES), f"{drawn['name']}: a map per policy (got {drawn['maps']})", failures)
        # The moment the page opens at (the first failure, else the peak of live bytes): a caption per policy, and
        # where the device's pages hold more than the allocator counts, the caption gives both.
        moments = data[drawn["name"]]["moments"]
        shown = next((m for m in moments if any(l.startswith("first failure") for l in m["labels"])), None) or \
            next((m for m in moments if "peak live" in m["labels"]), moments[0])
        for state in shown["states"]:
            if "held_bytes" not in state:
                continue
            text = captions.get((drawn["name"], state["policy"]), "")
            mapped = any(s[2] == "mapped" for s in state["strips"])
            held, reserved = state["held_bytes"], state["reserved_bytes"]
            why = ("" if held == reserved else "mapped at two addresses" if mapped and held > reserved else
                   "unmapped (spare) are not drawn" if mapped else "whole 2 MiB pages")
            said = [w for w in ("mapped at two addresses", "unmapped (spare) are not drawn", "whole 2 MiB pages",
                                "the map draws") if w in text]
            expect(said == ([why, "the map draws"] if why else []),
                   f"{drawn['name']}: {state['policy']}'s caption at row {shown['row']} (drawn {held}, reserved "
                   f"{reserved}) says {why or 'one figure'}: {text[:110]!r}", failures)
            shown_pages[0] += held != reserved
        distinct = {(p["driver_share"], p["reserved_over_live"]) for p in data[drawn["name"]]["curve"]}
        expect(drawn["curve_settings"] == 7 and drawn["curve_points"] == len(distinct),
               f"{drawn['name']}: 7 settings on the trade-off curve, at {len(distinct)} distinct points "
               f"(drew {drawn['curve_points']})", failures)
        expect(drawn["buckets"] == 32768 and 0 < drawn["points"] <= (2000 if interactive else 1200),
               f"{drawn['name']}: 32768 buckets a series, a line of {drawn['points']} points drawn", failures)
        # Only a page with the chart library zooms (a build without web/node_modules draws static charts even
        # where --static was not asked for): zoomed to a sixteenth, 2048 buckets and the one its right edge is
        # in, two to a point.
        if interactive:
            expect(drawn["zoom_points"] == 1025, f"{drawn['name']}: 1025 points in a view of a sixteenth "
                   f"(got {drawn['zoom_points']})", failures)
            expect(drawn["points_after_zoom"] == drawn["points"] and drawn["drawn_to"] == drawn["points"] - 1 and
                   abs(drawn["last_x"] - data[drawn["name"]]["series"]["bucket_seconds"] * 32759) < 1e-6 * drawn["last_x"],
                   f"{drawn['name']}: the whole trace again after the zoom, to its last point "
                   f"({drawn['points_after_zoom']} points, drawn to {drawn['drawn_to']}, the last at {drawn['last_x']} s)",
                   failures)
    expect(shown_pages[0] > 0, f"a caption where the map and the reserved bytes differ was drawn ({shown_pages[0]})", failures)
    return check


def captions_by_policy(dom, names):
    """The maps' captions in the page, by (trace, policy): each trace's section shows one moment's maps."""
    out = {}
    sections = re.split(r'<section id="trace-', dom)[1:]
    for name, section in zip(names, sections):
        for policy, text in re.findall(r'<div class="caption"><b>([^<]*)</b>(.*?)</div>', section, re.S):
            out[(name, html.unescape(policy))] = html.unescape(re.sub(r"<[^>]+>", "", text))
    return out


def main(vram, source, work):
    binary = chromium()
    if binary is None:
        if os.environ.get("VRAM_REQUIRE_BROWSER") == "1":
            raise SystemExit("no Chromium: scripts/setup --browser installs Debian's chromium")
        print("SKIP: no Chromium here (scripts/setup --browser installs it)")
        return 77
    os.makedirs(work, exist_ok=True)
    double_free = os.path.join(work, "double_free.csv")
    with open(double_free, "w") as f:
        f.write(DOUBLE_FREE)
    traces = [os.path.join(source, "examples", "traces", "vit_train.csv.gz"),
              os.path.join(source, "examples", "traces", "small.csv"), double_free]
    failures = []
    page = os.path.join(work, "report.html")
    check = check_page(binary, vram, page, traces, False, failures)
    if os.environ.get("VRAM_REQUIRE_BROWSER") == "1":  # scripts/test: the interactive page must be the one checked
        expect(check["chart_library"] is not None,
               "the page has its chart library (scripts/setup --browser installs npm and runs npm ci in web/)", failures)
    failed_under = [t for t in check["traces"] if t["failures"] > 0]
    expect(len(failed_under) == 1, "cuda-direct fails vit_train on this device, and the page says so", failures)
    check_page(binary, vram, os.path.join(work, "report-static.html"), traces, True, failures)
    shot = os.path.join(work, "report.png")
    browser(binary, "--window-size=1200,2600", f"--screenshot={shot}", "file://" + os.path.abspath(page))
    with open(shot, "rb") as f:
        head = f.read(8)
    expect(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(shot) > 20000, f"a screenshot at {shot}", failures)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
