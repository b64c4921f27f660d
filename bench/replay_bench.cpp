// Parsing plus replay, in trace events per second (items/s): each iteration reads a whole trace file and
// replays it against a fresh allocator on a fresh simulated device. The recorded gpt2 trace as the shared
// csv.gz and converted to vram's format; the synthetic `mixed` workload in vram's format, so the figure
// exists without shared/traces. Policies: cuda-direct, rmm-pool (the spine's target: >= 5 M events/s) and
// vram (its target: >= 2 M events/s).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "vram/device/sim_device.hpp"
#include "vram/replay/replay.hpp"
#include "vram/policies/registry.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/workload/workload.hpp"

namespace {

std::filesystem::path scratch() {
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("vram_replay_bench_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

std::string shared(const std::string& name) {
  const char* env = std::getenv("VRAM_SHARED_TRACES");
  return std::string(env != nullptr ? env : VRAM_SHARED_TRACES) + "/" + name;
}

// Files made once: the gpt2 trace in vram's format, and the mixed workload.
std::string file_for(const std::string& which) {
  const auto path = (scratch() / (which + ".vtrace")).string();
  if (!std::filesystem::exists(path)) {
    if (which == "gpt2") vram::write_trace(path, vram::read_trace(shared("gpt2_generate.csv.gz")), vram::trace_format::vram);
    else vram::write_trace(path, vram::make_workload("mixed"), vram::trace_format::vram);
  }
  return path;
}

void parse_and_replay(benchmark::State& state, const std::string& path, const char* policy) {
  if (!std::filesystem::exists(path)) {
    state.SkipWithError(("no trace at " + path).c_str());
    return;
  }
  std::size_t events = 0;
  for (auto _ : state) {
    const vram::trace t = vram::read_trace(path);
    vram::sim_device dev;
    auto r = vram::make_resource(policy, dev);
    const auto result = vram::replay(t, *r);
    benchmark::DoNotOptimize(result.peak_reserved_bytes);
    events = t.events.size();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * events));
}

void BM_gpt2_csv_gz(benchmark::State& s, const char* policy) { parse_and_replay(s, shared("gpt2_generate.csv.gz"), policy); }
void BM_gpt2_vram_format(benchmark::State& s, const char* policy) {
  if (!std::filesystem::exists(shared("gpt2_generate.csv.gz"))) {
    s.SkipWithError("no shared traces");
    return;
  }
  parse_and_replay(s, file_for("gpt2"), policy);
}
void BM_mixed_vram_format(benchmark::State& s, const char* policy) { parse_and_replay(s, file_for("mixed"), policy); }

}  // namespace

BENCHMARK_CAPTURE(BM_gpt2_csv_gz, cuda_direct, "cuda-direct")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_gpt2_csv_gz, rmm_pool, "rmm-pool")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_gpt2_csv_gz, vram, "vram")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_gpt2_vram_format, cuda_direct, "cuda-direct")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_gpt2_vram_format, rmm_pool, "rmm-pool")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_gpt2_vram_format, vram, "vram")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_mixed_vram_format, cuda_direct, "cuda-direct")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_mixed_vram_format, rmm_pool, "rmm-pool")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_mixed_vram_format, vram, "vram")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
