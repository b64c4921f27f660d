"""Every include arrow between the folders of src/vram points down: no folder reaches itself again through
includes. And the driver only behind the device seam: outside device/, no file includes cuda.h or reaches
the driver table (cuda_api, load_cuda_api); integrations/ is exempt (libvram_record.so, which the driver
loads into other programs, observes their calls through CUPTI and makes none of its own).
Prints the arrows that close a cycle and the files that reach the driver, and exits 1 if there is one.
Run by ctest (include_layers):  python3 tests/include_layers.py SRC_DIR"""
import collections
import os
import re
import sys


def main(src):
    edges = collections.defaultdict(set)
    files_of = collections.defaultdict(list)
    driver = re.compile(r'#include <cuda\.h>|#include <cupti|\bcuda_api\b|\bload_cuda_api\b')
    outside_seam = []
    for root, _, files in os.walk(src):
        for name in files:
            path = os.path.join(root, name)
            here = os.path.relpath(path, src).split(os.sep)[0]
            with open(path, encoding="utf-8") as f:
                text = f.read()
                if here not in ("device", "integrations") and driver.search(text):
                    outside_seam.append(os.path.relpath(path, src))
                for m in re.finditer(r'#include "vram/([a-z_]+)/', text):
                    there = m.group(1)
                    if there != here:
                        edges[here].add(there)
                        files_of[(here, there)].append(os.path.relpath(path, src))

    def reaches(start, goal):
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges[node])
        return False

    cycles = [(a, b) for a in sorted(edges) for b in sorted(edges[a]) if reaches(b, a)]
    for a, b in cycles:
        print(f"{a}/ -> {b}/ closes a cycle: {', '.join(sorted(files_of[(a, b)])[:4])}")
    for path in sorted(outside_seam):
        print(f"{path} reaches the CUDA driver outside device/")
    print(f"{len(edges)} folders, {sum(len(v) for v in edges.values())} arrows, {len(cycles)} in a cycle; "
          f"{len(outside_seam)} files outside device/ reach the driver")
    return 1 if cycles or outside_seam else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src", "vram")))
