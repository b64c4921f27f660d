"""Writes a large PyTorch-style memory snapshot, to measure how vram reads one: N trace entries (allocs, and
frees requested and completed) on one device, each with two frames of stack, pickled as PyTorch pickles its
snapshots (protocol 4; keys and action names shared). Plain Python, no torch needed.

    python3 bench/big_snapshot.py 3000000 big.pickle        # about 350 MB, 4.5 million entries
    /usr/bin/time -v build/vram check big.pickle            # Maximum resident set size, Elapsed
    python3 bench/big_snapshot.py 667000 late.pickle --late  # the same less its first entry (an alloc):
                                                             # one block live before the trace begins
"""
import pickle
import random
import sys


def main(n, path, late=False):
    random.seed(1)
    frames = [{"filename": "/work/model.py", "line": 10, "name": "forward"},
              {"filename": "/work/train.py", "line": 20, "name": "step"}]
    entries, live, t = [], [], 0

    def entry(action, addr, size, time):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": time,
                "frames": [dict(f) for f in frames], "compile_context": "N/A"}

    for i in range(n):
        t += 3
        if live and (len(live) > 2000 or random.random() < 0.5):
            addr, size = live.pop(random.randrange(len(live)))
            entries.append(entry("free_requested", addr, size, t))
            entries.append(entry("free_completed", addr, size, t + 1))
        else:
            size = random.choice([512, 4096, 1 << 20, 8 << 20])
            addr = 0x7F0000000000 + i * (16 << 20)
            live.append((addr, size))
            entries.append(entry("alloc", addr, size, t))
    if late:
        entries = entries[1:]
    with open(path, "wb") as f:
        pickle.dump({"segments": [], "device_traces": [entries]}, f, protocol=4)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--late"):
        print(__doc__)
        sys.exit(2)
    main(int(sys.argv[1]), sys.argv[2], late=len(sys.argv) == 4)
