#!/usr/bin/env python3
"""Writes the seeds of the pickle_paths fuzz target (tests/fuzz/corpus/pickle_paths): snapshots whose trace
entries take every shape the pickle machine reads whole, or gives back to the opcode-by-opcode path (frames
empty, first or last, fetched from the memo, new each time; entries that are no records), each pickled by
Python's own pickler with protocols 2 (BINPUT) and 4 (MEMOIZE, FRAME)."""
import os
import pickle

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "pickle_paths")
frames = [dict(filename="model.py", line=i, name="forward") for i in range(3)]
shared = frames[:2]


def entry(i, **fields):
    e = dict(action="alloc" if i % 2 == 0 else "free_requested", addr=139714900262912 + 512 * i, size=512 << i,
             stream=0, time_us=1796398433770208 + i)
    e.update(fields)
    return e


cases = {
    "frames_empty_last": [entry(i, compile_context="N/A", user_metadata="", frames=[]) for i in range(4)],
    "frames_first": [dict(frames=[], **entry(i)) for i in range(4)],
    "frames_fetched": [entry(0, frames=frames[:]), entry(1, frames=[frames[0]]), entry(2, frames=frames[:2]),
                       entry(3, frames=shared), entry(4, frames=shared)],
    "frames_new_each": [entry(i, frames=[dict(filename="f.py", line=i, name="g")]) for i in range(3)],
    "frame_with_tag_key": [entry(0, frames=[dict(action="x", line=1)]), entry(1, frames=[dict(action="y")])],
    "not_records": [entry(0, addr=2**64), entry(1, size="x"), dict(action=5, addr=1), entry(2, stream=True), entry(3)],
}
os.makedirs(here, exist_ok=True)
for name, entries in cases.items():
    for protocol in (2, 4):
        with open(os.path.join(here, f"{name}_p{protocol}.pickle"), "wb") as f:
            f.write(pickle.dumps(dict(segments=[], device_traces=[entries]), protocol=protocol))
