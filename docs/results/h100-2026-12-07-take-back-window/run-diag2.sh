#!/bin/bash
# The pool alone on the GPU, HEAD's build against the working tree's: 1-16 threads allocating and freeing one
# block each, with the pool's hot-path stops; then vram bench for both.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd); t0=$(date +%s); ROOT=$PWD
say() { echo "[$(($(date +%s) - t0)) s] $*"; }
# base: this tree without the take-back window (.gpubuild/base.patch, applied in reverse)
rm -rf /tmp/base && mkdir -p /tmp/base && cp -r CMakeLists.txt cmake src include web docs tests bench python /tmp/base/ 2>/dev/null
(cd /tmp/base && patch -R -p1 < "$ROOT/.gpubuild/base.patch") > "$OUT/base-patch.txt" 2>&1 || { cat "$OUT/base-patch.txt"; exit 1; }
cp .gpubuild/base.patch "$OUT/"
build() {  # SRC BUILD
  { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DVRAM_DEPS_DIR="$ROOT/.deps" -DVRAM_BUILD_TESTS=OFF &&
    cmake --build "$2" -j "$(nproc)" --target vram vram_cli; } >> "$OUT/1-build.txt" 2>&1 || { tail -30 "$OUT/1-build.txt"; exit 1; }
  local d=.gpubuild/diag.cpp; [ "$1" = /tmp/base ] && { sed 's/std::printf("take_back_growths.*$//' .gpubuild/diag.cpp > /tmp/diag_base.cpp; d=/tmp/diag_base.cpp; }
  g++ -std=c++20 -O2 -I"$1/src" -I"$2/generated" -I.deps/include -DFMT_HEADER_ONLY=1 $d "$2/libvram.a" -l:libz.so.1 -lpthread -ldl -o "$2/diag" >> "$OUT/1-build.txt" 2>&1 || { tail -30 "$OUT/1-build.txt"; exit 1; }
}
build /tmp/base /tmp/base/build & build "$ROOT" "$ROOT/build2" & wait
say built; nvidia-smi -L
A="1048576 1 1048576 16 8388608 16 67108864 16 65536 16"
for round in 1 2 3; do
  for b in /tmp/base/build "$ROOT/build2"; do echo "== $b round $round"; DIAG_MS=300 "$b/diag" cuda $A; done
done 2>&1 | tee "$OUT/diag.txt"
say diag
for b in /tmp/base/build "$ROOT/build2"; do
  n=$(basename $(dirname $b))_$(basename $b)
  "$b/vram" bench --device cuda --sizes 64K,1M,64M --threads 1,16 --json > "$OUT/bench-$n.json" 2> "$OUT/bench-$n.err"
done
say benched
python3 - "$OUT" <<'PY'
import json,sys,glob
for f in sorted(glob.glob(sys.argv[1]+'/bench-*.json')):
    d=json.load(open(f))
    for r in d['rows']:
        if r['allocator']=='vram': print(f.split('/')[-1][:-5], r['size'], r['threads'], f"{r['pairs_per_second']/1e6:.1f}M cpu_share={r['cpu_share']:.2f} ratio={r['ratio']:.0f}x")
PY
