#!/usr/bin/env python3
"""Workload shapes that the repository's traces and `vram simulate` do not have, written as PyTorch CSV traces
(time_us,action,addr,size,stream) for `vram replay`, `vram fit` and `vram report`.

    python3 bench/workload_shapes.py OUTDIR [--seeds 1 2] [--shapes llm_decode giant ...]

Each shape is a pattern seen in real programs, with sizes drawn from a seeded generator:
  llm_decode        weights, then requests whose KV cache grows by torch.cat every decoded token (24 layers)
  finetune_dynamic  a training loop with sequence lengths and batch sizes that change every micro-batch
  diffusion         a UNet sampling loop at three resolutions, a VAE decode of large blocks after each image
  two_stream        input batches allocated on a loader stream and freed on the compute stream
  growing           a buffer that grows 8% a step (a tensor built by repeated torch.cat), restarted 20 times
  giant             two blocks of 8-20 GiB (a preallocated KV cache or weights loaded whole) beside churn
Every shape fits an 80 GB card except finetune_dynamic (88-98 GiB live: an H200's)."""
import argparse
import gzip
import os
import random

MiB = 1 << 20


class Trace:
    def __init__(self, path):
        self.path, self.rows, self.t, self.next, self.live = path, [], 0, 1 << 40, {}

    def tick(self, us):
        self.t += us

    def alloc(self, size, stream=0):
        a = self.next
        self.next += (size + 511) // 512 * 512 + 512
        self.rows.append((self.t, "alloc", a, size, stream))
        self.live[a] = (size, stream)
        self.t += 1
        return a

    def free(self, a, stream=None):
        size, st = self.live.pop(a)
        self.rows.append((self.t, "free_requested", a, size, st if stream is None else stream))
        self.t += 1

    def write(self):
        with gzip.open(self.path, "wt") as f:
            f.write("time_us,action,addr,size,stream\n")
            f.writelines("%d,%s,%d,%d,%d\n" % r for r in self.rows)


def llm_decode(r, t):
    for _ in range(60):
        t.alloc(r.choice([64, 128, 256]) * MiB)
    for _ in range(40):
        b, p, g, layers, d = r.randint(1, 16), r.randint(32, 2048), r.randint(16, 256), 24, 4096
        kv = [t.alloc(2 * b * p * d * 2) for _ in range(layers)]
        for a in [t.alloc(b * p * d * 2 * r.choice([1, 4])) for _ in range(8)]:
            t.free(a)
        for step in range(g):
            n = p + step + 1
            for i in range(layers):
                grown = t.alloc(2 * b * n * d * 2)
                t.free(kv[i])
                kv[i] = grown
                t.free(t.alloc(b * d * 2 * 4))
            t.tick(20000)
        for a in kv:
            t.free(a)
        t.tick(r.randint(0, 500000))


def finetune_dynamic(r, t):
    params = [r.randint(1, 64) * MiB for _ in range(200)]
    for p in params:
        t.alloc(p)
    grads = opt = None
    for _ in range(40):
        if grads is None:
            grads = [t.alloc(p) for p in params]
        for _ in range(4):
            seq, bs = r.choice([128, 256, 384, 512, 768, 1024, 2048]), r.randint(2, 16)
            acts = []
            for _ in range(24):
                for _ in range(6):
                    acts.append(t.alloc(bs * seq * r.choice([1024, 4096, 16384]) * 2 // 8 * 8 + r.randint(0, 3) * 512))
                t.free(t.alloc(bs * seq * seq * 2))
            t.tick(30000)
            for a in reversed(acts):
                t.free(t.alloc(t.live[a][0]))
                t.free(a)
            t.tick(30000)
        if opt is None:
            opt = [t.alloc(2 * p) for p in params]
        t.tick(10000)


def diffusion(r, t):
    for _ in range(300):
        t.alloc(r.randint(1, 40) * MiB)
    for _ in range(30):
        res, bs = r.choice([512, 768, 1024]), r.choice([1, 2, 4])
        for _ in range(25):
            acts = []
            for _ in range(40):
                acts.append(t.alloc(bs * res * res * r.choice([320, 640, 1280]) * 2 // 64))
                if r.random() < 0.5:
                    t.free(acts.pop(r.randrange(len(acts))))
            for a in acts:
                t.free(a)
            t.tick(40000)
        for a in [t.alloc(bs * res * res * 512 * 2) for _ in range(3)]:
            t.free(a)
        t.tick(200000)


def two_stream(r, t):
    for _ in range(100):
        t.alloc(r.randint(1, 32) * MiB)
    queue = []
    for _ in range(300):
        queue.append(t.alloc(r.randint(8, 64) * MiB, stream=7))
        if len(queue) > 3:
            batch = queue.pop(0)
            for a in [t.alloc(r.randint(1, 128) * MiB) for _ in range(20)]:
                t.free(a)
            t.free(batch, stream=0)
        t.tick(20000)


def growing(r, t):
    for _ in range(20):
        size = r.randint(1, 4) * MiB
        buf, small = t.alloc(size), []
        for _ in range(60):
            size = int(size * 1.08) + r.randint(0, 4096)
            grown = t.alloc(size)
            t.free(buf)
            buf = grown
            small.append(t.alloc(r.randint(1, 100) * 1024))
            t.tick(1000)
        t.free(buf)
        for a in small:
            t.free(a)
        t.tick(50000)


def giant(r, t):
    big = [t.alloc(r.randint(8, 20) * 1024 * MiB) for _ in range(2)]
    for step in range(50):
        acts = [t.alloc(r.randint(1, 1024) * MiB) for _ in range(12)]
        r.shuffle(acts)
        for a in acts:
            t.free(a)
        if step % 10 == 9:
            t.free(big.pop(0))
            big.append(t.alloc(r.randint(8, 20) * 1024 * MiB))
        t.tick(100000)


SHAPES = {f.__name__: f for f in (llm_decode, finetune_dynamic, diffusion, two_stream, growing, giant)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=list(SHAPES))
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    for name in a.shapes:
        for seed in a.seeds:
            t = Trace(os.path.join(a.outdir, f"{name}{seed}.csv.gz"))
            SHAPES[name](random.Random(seed), t)
            t.write()
            print(f"{t.path}: {len(t.rows)} events", flush=True)


if __name__ == "__main__":
    main()
