#!/usr/bin/env python3
"""vram's pickle machine against Python's own pickler, on random snapshots shaped like PyTorch's.

    pickle_vs_python.py PICKLE_DUMP [--cases N] [--seed S]

Each case is a random object with the parts of a memory snapshot (segments with blocks, device traces of
entries, shared stack frames, settings), with entries that are records and entries that only nearly are
(a field of another kind, no action, one key), keys in random orders, pickled by Python at protocol 2 to 5.
tests/support/pickle_dump reads each file as the snapshot reader does, both ways (entries read whole, and
one opcode at a time), and its text must equal the text worked out here from the object itself. Here the
rules of pickle_records (src/vram/trace/pickle.hpp) are applied to what pickle.load would give:
  - a dict written with SETITEMS whose items hold 'action' with a string and any of addr, size, stream,
    time_us with a 64-bit int (not a bool), and only string keys, is the record R(action,addr,size,stream,
    time_us), '-' for a field it lacks;
  - its 'frames' list, when it was first written inside the dict, is given back with the dicts, lists and
    tuples first written inside that list: a later reference to one of them (a memo fetch) reads None.
Exit status 0 when every case agrees; 1, with the first differences shown, when one does not.
"""
import argparse
import os
import pickle
import random
import subprocess
import sys
import tempfile

FIELDS = ("addr", "size", "stream", "time_us")


class Reader:
    """Describes an object as vram's machine reads its pickle, following the pickler's order."""

    def __init__(self):
        self.birth = {}       # id -> order of the container's creation as the unpickler makes it
        self.records = {}     # id of a dict read as a record -> its text
        self.released = set()
        self.count = 0

    def born(self, x):
        self.birth[id(x)] = self.count
        self.count += 1

    def text(self, x):
        if x is None:
            return b"N"
        if x is True:
            return b"T"
        if x is False:
            return b"F"
        if isinstance(x, int):
            return str(x).encode() if -2**63 <= x < 2**63 else b"BIG"
        if isinstance(x, float):
            return ("%f" % x).encode()
        if isinstance(x, str):
            return b"'" + x.encode("utf-8") + b"'"
        if isinstance(x, bytes):
            return b"b'" + x + b"'"
        if id(x) in self.released:
            return b"N"
        if id(x) in self.records:
            return self.records[id(x)]
        if isinstance(x, tuple):
            if not x:
                self.count += 1  # EMPTY_TUPLE: a new container each time, never memoized
                return b"()"
            first = id(x) not in self.birth
            inner = b"".join(self.text(i) + b" " for i in x)
            if first and id(x) not in self.birth:
                self.born(x)  # made after its items (TUPLEn, or MARK ... TUPLE)
            return b"(" + inner + b")"
        if isinstance(x, list):
            if id(x) not in self.birth:
                self.born(x)
            return b"[" + b"".join(self.text(i) + b" " for i in x) + b"]"
        if isinstance(x, dict):
            first = id(x) not in self.birth
            if first:
                self.born(x)
            inner = b"".join(self.text(k) + b" " + self.text(v) + b" " for k, v in x.items())
            if first and len(x) > 1:  # SETITEMS onto the empty dict: the one place a dict becomes a record
                rec = self.record(x)
                if rec is not None:
                    self.records[id(x)] = rec
                    return rec
            return b"{" + inner + b"}"
        raise TypeError(type(x))

    def record(self, d):
        tag, fields, frames = None, [None] * 4, None
        for k, v in d.items():
            if not isinstance(k, str):
                return None
            if k == "action":
                if not isinstance(v, str):
                    return None
                tag = v
            elif k in FIELDS:
                if isinstance(v, bool) or not isinstance(v, int) or not -2**63 <= v < 2**63:
                    return None
                fields[FIELDS.index(k)] = v
            elif k == "frames" and isinstance(v, list) and id(v) not in self.released:
                frames = v
        if tag is None:
            return None
        if frames is not None and self.birth[id(frames)] >= self.birth[id(d)]:
            for item in frames:
                if isinstance(item, (dict, list, tuple)) and id(item) in self.birth and item is not frames \
                        and id(item) not in self.released and self.birth[id(item)] >= self.birth[id(frames)]:
                    self.released.add(id(item))
            self.released.add(id(frames))
        text = "R(" + tag + "".join("," + ("-" if f is None else str(f)) for f in fields) + ")"
        return text.encode("utf-8")


def snapshot(rng, protocol):
    """A random object with the parts of a memory snapshot (bytes only from protocol 3, which has an opcode
    for them: protocol 2 writes bytes as a call of a global, which vram refuses to make)."""
    names = ["forward", "backward", "<module>", "linear", "attention", "matmul", "ünïcode_fn"]
    files = ["model.py", "torch/nn/modules/linear.py", "train.py", "/usr/lib/python3/site.py"]
    pool = [{"filename": rng.choice(files), "line": rng.randrange(1, 5000), "name": rng.choice(names)}
            for _ in range(rng.randrange(1, 12))]

    def frames():
        out = []
        for _ in range(rng.randrange(0, 6)):
            r = rng.random()
            if r < 0.6:
                out.append(rng.choice(pool))  # shared: memoized where first written
            elif r < 0.9:
                out.append({"filename": rng.choice(files), "line": rng.randrange(1, 5000), "name": rng.choice(names)})
            else:
                out.append((rng.choice(files), rng.randrange(100)))
        return out

    def number():
        r = rng.random()
        if r < 0.5:
            return rng.randrange(0, 2**31)
        if r < 0.8:
            return rng.randrange(2**31, 2**48)
        if r < 0.9:
            return rng.choice([0, -1, 1, 255, 256, 65535, 65536, -2**31, 2**63 - 1, -2**63])
        return -rng.randrange(1, 2**40)

    def odd_value():
        return rng.choice([None, True, False, 1.5, "text", 2**64 + 3, -2**70, [], (1, 2)]
                          + ([b"raw"] if protocol >= 3 else []))

    def entry():
        e = {"action": rng.choice(["alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                                   "segment_map", "segment_unmap", "oom", "snapshot"])}
        for f in FIELDS:
            if rng.random() < 0.9:
                e[f] = number()
        e["frames"] = frames()
        if rng.random() < 0.3:
            e["compile_context"] = "N/A"
        if rng.random() < 0.2:
            e["user_metadata"] = ""
        r = rng.random()
        if r < 0.05:
            e[rng.choice(FIELDS)] = odd_value()  # a field of another kind: the entry stays a dict
        elif r < 0.08:
            del e["action"]
        elif r < 0.10:
            e["action"] = odd_value()
        elif r < 0.12:
            e = {"action": e["action"]}  # one key: SETITEM, not SETITEMS
        elif r < 0.13:
            e = {}
        elif r < 0.14:
            e[7] = "not a string key"
        items = list(e.items())
        rng.shuffle(items)
        return dict(items)

    def block():
        return {"address": number(), "size": number(), "requested_size": number(),
                "state": rng.choice(["active_allocated", "inactive", "active_pending_free"]), "frames": frames()}

    segments = [{"device": rng.randrange(2), "address": number(), "total_size": number(), "stream": number(),
                 "segment_type": rng.choice(["large", "small"]), "segment_pool_id": (0, 0),
                 "is_expandable": rng.random() < 0.5, "frames": frames(),
                 "blocks": [block() for _ in range(rng.randrange(0, 5))]}
                for _ in range(rng.randrange(0, 4))]
    traces = [[entry() for _ in range(rng.randrange(0, 40))] for _ in range(rng.randrange(1, 3))]
    parts = [("segments", segments), ("device_traces", traces),
             ("allocator_settings", {"PYTORCH_CUDA_ALLOC_CONF": None, "max_split_size": -1, "roundup": 0.5}),
             ("external_annotations", [])]
    if rng.random() < 0.3:  # entries shared with another part of the file: fetched again from the memo
        parts.append(("again", [rng.choice(t) for t in traces if t] + [rng.choice(pool)]))
    rng.shuffle(parts)
    return dict(parts)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("pickle_dump")
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    rng = random.Random(a.seed)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        args, expected = [a.pickle_dump], []
        for i in range(a.cases):
            protocol = rng.choice([2, 3, 4, 5])
            obj = snapshot(rng, protocol)
            path = os.path.join(work, f"case{i}.pickle")
            with open(path, "wb") as f:
                pickle.dump(obj, f, protocol=protocol)
            expected.append((i, protocol, Reader().text(obj)))
            args += [path, path + ".txt"]
        subprocess.run(args, check=True)
        for i, protocol, want in expected:
            for suffix, how in ((".txt", "read whole"), (".txt.slow", "one opcode at a time")):
                with open(os.path.join(work, f"case{i}.pickle{suffix}"), "rb") as f:
                    got = f.read()
                if got != want:
                    failures += 1
                    if failures <= 3:
                        at = next((j for j in range(min(len(got), len(want))) if got[j] != want[j]),
                                  min(len(got), len(want)))
                        print(f"case {i} (protocol {protocol}, {how}) differs at character {at}:\n"
                              f"  vram:   ...{got[max(0, at - 120):at + 80]!r}\n"
                              f"  Python: ...{want[max(0, at - 120):at + 80]!r}")
    print(f"{a.cases} snapshots pickled by Python at protocols 2-5, each read both ways: "
          f"{failures} readings differ from Python's")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
