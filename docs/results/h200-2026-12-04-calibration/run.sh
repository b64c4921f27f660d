set -x
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DVRAM_BUILD_TESTS=OFF -DVRAM_DEPS_DIR=$PWD/.deps > $OUT/build.txt 2>&1
cmake --build build -j16 --target vram_cli bench_vmm >> $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
(nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; date -u; git log -1 --format=%H 2>/dev/null) > $OUT/device.txt
build/vram simulate mixed --seed 1 -o .traces/mixed1.vtrace
build/vram simulate inference --seed 1 -o .traces/inference1.vtrace
timeout 200 build/bench/bench_vmm --benchmark_min_time=0.02s --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_format=json > $OUT/vmm.json 2> $OUT/vmm.err
for i in 1 2 3; do timeout 100 build/vram replay .traces/*.csv.gz .traces/*.vtrace --policy vram,torch-native,torch-expandable --device cuda --json > $OUT/replay-cuda-$i.json 2>>$OUT/replay.err; done
build/vram replay .traces/*.csv.gz .traces/*.vtrace --policy vram,torch-native,torch-expandable --device sim --json > $OUT/replay-sim.json
ls -la $OUT
