#!/bin/bash
# vram record on a GPU after its output moved to a staging name: the exact calls of record_calls.cu, and the
# last recording kept when a run records nothing.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); ROOT=$PWD; t0=$(date +%s)
say() { echo "[$(($(date +%s) - t0)) s] $*"; }
source bench/build-header.sh
build_header > "$OUT/1-build.txt"
{ cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVRAM_DEPS_DIR="$PWD/.deps" &&
  cmake --build build -j "$(nproc)" --target vram_cli vram_record; } >> "$OUT/1-build.txt" 2>&1 || { tail -30 "$OUT/1-build.txt"; exit 1; }
say built
nvcc -O2 -o /tmp/record_calls tests/gpu/record_calls.cu -lcuda >> "$OUT/1-build.txt" 2>&1 || { tail -20 "$OUT/1-build.txt"; exit 1; }
say nvcc
cd "$OUT"
"$ROOT/build/vram" record -o calls.vram -- /tmp/record_calls calls-expected.jsonl > 2-record.txt 2>&1; echo "exit $?" >> 2-record.txt
"$ROOT/build/vram" convert calls.vram -o calls.csv --to torch --force >> 2-record.txt 2>&1
python3 - >> 2-record.txt <<'PY'
import csv, json
expected = [json.loads(l) for l in open("calls-expected.jsonl")]
got = [{"action": r["action"], "addr": int(r["addr"]), "size": int(r["size"])} for r in csv.DictReader(open("calls.csv"))]
print(f"known calls: {len(expected)} made, {len(got)} recorded, exact: {got == expected}")
PY
sum=$(md5sum < calls.vram); "$ROOT/build/vram" record -o calls.vram -- true > 3-keep.txt 2>&1; echo "exit $?" >> 3-keep.txt
[ "$(md5sum < calls.vram)" = "$sum" ] && echo "kept: yes" >> 3-keep.txt || echo "kept: NO" >> 3-keep.txt
ls -la >> 3-keep.txt
cat 2-record.txt 3-keep.txt; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u
