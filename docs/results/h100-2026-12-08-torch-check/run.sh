#!/bin/bash
# vram under PyTorch on the GPU: the 16 checks of torch_gpu_check.py, then a training-like program under
# VRAM_RECORD whose spawn worker also runs on vram: the parent's recording whole, the worker's beside it.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); ROOT=$PWD; t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0)) s] $*"; }
{ cmake -S . -B /tmp/g -G Ninja -DCMAKE_BUILD_TYPE=Release -DVRAM_DEPS_DIR="$ROOT/.deps" -DVRAM_BUILD_TESTS=OFF &&
  cmake --build /tmp/g -j 16; } > "$OUT/1-build.txt" 2>&1 || { tail -30 "$OUT/1-build.txt"; exit 1; }
ls /tmp/g/*.so >> "$OUT/1-build.txt"
say built
PYTHONPATH=python VRAM_LIBRARY=/tmp/g/libvram.so python3 python/tests/torch_gpu_check.py --json "$OUT/2-torch-check.json" > "$OUT/2-torch-check.txt" 2>&1
echo "exit $?" >> "$OUT/2-torch-check.txt"
say torch-check
cat > /tmp/spawn_train.py <<'PY'
import multiprocessing as mp, os, sys
import vram.torch
vram.torch.enable()
import torch

def worker():
    vram.torch.enable()
    x = torch.randn(1024, 1024, device="cuda")
    y = x @ x
    torch.cuda.synchronize()
    print("worker", os.getpid(), float(y.sum()) == float(y.sum()), flush=True)

if __name__ == "__main__":
    mp.set_start_method("spawn")
    a = torch.randn(2048, 2048, device="cuda")
    w = mp.Process(target=worker)
    w.start(); w.join()
    b = a @ a
    torch.cuda.synchronize()
    print("parent", os.getpid(), w.exitcode, flush=True)
PY
cd "$OUT"
PYTHONPATH="$ROOT/python" VRAM_LIBRARY=/tmp/g/libvram.so VRAM_RECORD=run.vram python3 /tmp/spawn_train.py > 3-spawn.txt 2>&1
echo "exit $?" >> 3-spawn.txt
ls -la run.vram* >> 3-spawn.txt
for f in run.vram*; do /tmp/g/vram check "$f" >> 3-spawn.txt 2>&1; done
cat 2-torch-check.txt | tail -25; cat 3-spawn.txt
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python3 -c "import torch; print(torch.__version__)"; date -u
