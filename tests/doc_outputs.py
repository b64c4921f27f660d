"""The outputs that README.md and docs/ show under their `vram` examples are the tool's real outputs.

doc_examples runs every example and checks its exit status; this test checks what they print. An example with
output is one or more command lines (`$ vram ...`) followed by what the last one printed: in the same indented
block or fenced block, or in a fenced block right after the commands. Each document's commands run in order, in
a folder of their own holding `build/vram` and `examples` (as in doc_examples), and the last command's standard
output and standard error together (both line-buffered, so in the order a terminal shows them) are compared
with the shown lines, word by word (spaces between words may differ: a wider number moves a column).

What may differ from run to run is not compared:
  - the last column of a replay or fit table (`Mev/s`, the replay's speed on this CPU);
  - a date and time (2026-12-02T19:07:56Z), and the size of the report's page (it holds the replays' speeds);
  - the whole output of a command whose comment says `(output varies)` (vram bench: timings), or
    `needs a GPU` (not run here).

Run by ctest: python3 tests/doc_outputs.py SOURCE_DIR VRAM_TOOL WORK_DIR
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

COMMAND = re.compile(r"^(build/)?vram ")  # after its "$ "
DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ?")
PAGE_SIZE = re.compile(r"^(wrote \S+ )\(\d+\.\d\d KiB\)")  # the report's page holds the replays' speeds
SPEED = re.compile(r"^\d+\.\d\d$")


def joined(lines):
    """Lines with a trailing backslash joined to the next, as a shell would read them."""
    out = []
    for line in lines:
        if out and out[-1].endswith("\\"):
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
    return out


def blocks(text):
    """The document's code blocks in order, each a list of lines: indented blocks (4 spaces taken off, running on
    across blank lines) and fenced blocks (their fences left out)."""
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            out.append((i, lines[i + 1:j], "fence"))
            i = j + 1
            continue
        if line.startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            body = []
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                body.append(lines[j][4:])
                j += 1
            while body and not body[-1].strip():
                body.pop()
            out.append((i, body, "indent"))
            i = j
            continue
        out.append((i, None, "text"))
        i += 1
    return out


def examples(text):
    """(line number, commands, shown output or None) for each run of `$ vram` commands, in order."""
    found = []
    bl = blocks(text)
    k = 0
    while k < len(bl):
        start, body, kind = bl[k]
        if body is None:
            k += 1
            continue
        raw_length = len(body)  # where the block ends in the document, before continued lines are joined
        body = joined(body)
        i = 0
        while i < len(body):
            if not body[i].startswith("$ "):
                i += 1
                continue
            commands = []
            while i < len(body) and body[i].startswith("$ "):
                commands.append(body[i][2:])
                i += 1
            shown = []
            while i < len(body) and not body[i].startswith("$ "):
                shown.append(body[i])
                i += 1
            while shown and not shown[-1].strip():
                shown.pop()
            if not shown and i >= len(body) and k + 1 < len(bl) and bl[k + 1][2] == "fence" and \
                    bl[k + 1][0] == start + raw_length and bl[k + 1][1] and not bl[k + 1][1][0].startswith("$ "):
                shown = bl[k + 1][1]  # a fenced block right after the commands holds their output
                k += 1
            found.append((start + 1, commands, shown or None))
        k += 1
    return found


def comment(command):
    m = re.search(r"\s#\s*(.*)$", command)
    return m.group(1) if m else ""


def words(lines, speed_column):
    """Each line's words, with what varies from run to run masked."""
    out = []
    for line in lines:
        w = PAGE_SIZE.sub(r"\1(<size>)", DATE.sub("<date>", line)).split()
        if speed_column and w and SPEED.match(w[-1]) and len(w) > 8:
            w[-1] = "<speed>"
        out.append(w)
    while out and not out[-1]:
        out.pop()
    return out


def main():
    source, tool, work = Path(sys.argv[1]), Path(sys.argv[2]).resolve(), Path(sys.argv[3])
    shutil.rmtree(work, ignore_errors=True)
    docs = [source / "README.md"] + sorted((source / "docs").rglob("*.md"))
    env = dict(os.environ)
    checked, failures = 0, []
    for doc in docs:
        found = [e for e in examples(doc.read_text()) if any(COMMAND.match(c) for c in e[1])]
        if not any(shown for _, _, shown in found):
            continue
        folder = work / re.sub(r"[/.]", "_", str(doc.relative_to(source)))
        (folder / "build").mkdir(parents=True)
        (folder / "build" / "vram").symlink_to(tool)
        (folder / "examples").symlink_to((source / "examples").resolve())
        last = max(n for n, _, shown in found if shown)
        for number, commands, shown in found:
            if number > last:
                break
            for command in commands:
                if not COMMAND.match(command) or "needs a GPU" in comment(command):
                    result = None
                    continue
                line = re.sub(r"^(build/)?vram ", "build/vram ", re.sub(r"\s+#.*$", "", command))
                result = subprocess.run(["stdbuf", "-oL", "-eL", "sh", "-c", line + " 2>&1"], cwd=folder, env=env,
                                        stdout=subprocess.PIPE, text=True, errors="replace", timeout=600)
            where = f"{doc.relative_to(source)}:{number}: {commands[-1]}"
            if not shown or result is None or "output varies" in comment(commands[-1]):
                continue
            speed = any(line.rstrip().endswith("Mev/s") for line in shown)
            want, got = words(shown, speed), words(result.stdout.split("\n"), speed)
            checked += 1
            if want != got:
                diff = [f"  line {i + 1}:\n    shown: {' '.join(a)}\n    real:  {' '.join(b)}"
                        for i, (a, b) in enumerate(zip(want + [[]] * len(got), got + [[]] * len(want)))
                        if a != b][:6]
                failures.append(f"{where}\n" + "\n".join(diff))
            else:
                print(f"ok: {where}")
    for f in failures:
        print(f"OUTPUT DIFFERS: {f}")
    print(f"{checked - len(failures)} of {checked} shown outputs are the real ones")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
