// Mixed sizes freed out of order: sizes log-uniform from 512 B to 64 MiB, each block living a random number
// of later operations, so holes of every size open and close across the address space. Operations are
// 1 ms apart, the pace of a program that launches a kernel or two between allocations.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/workload/trace_builder.hpp"
#include "vram/workload/workload.hpp"

namespace vram {

trace make_mixed_workload(const workload_options& options) {
  trace_builder b("mixed");
  std::mt19937_64 rng(options.seed);
  std::uniform_real_distribution<double> log_size(std::log2(512.0), std::log2(64.0 * MiB));
  std::uniform_int_distribution<int> lifetime(1, 400);
  struct pending {
    std::int64_t due;  // operation index at which it is freed
    std::uint64_t addr, size;
  };
  std::vector<pending> heap;  // min-heap on due
  auto later = [](const pending& x, const pending& y) { return x.due > y.due; };
  const std::int64_t ops = 20000 * static_cast<std::int64_t>(std::max<std::uint64_t>(options.scale, 1));
  std::int64_t t = 0;
  for (std::int64_t op = 0; op < ops; ++op) {
    while (!heap.empty() && heap.front().due <= op) {
      std::pop_heap(heap.begin(), heap.end(), later);
      b.free(t, heap.back().addr, heap.back().size);
      heap.pop_back();
      t += 1000;
    }
    const auto size = static_cast<std::uint64_t>(std::exp2(log_size(rng)));
    heap.push_back({op + lifetime(rng), b.alloc(t, size), size});
    std::push_heap(heap.begin(), heap.end(), later);
    t += 1000;
  }
  std::sort(heap.begin(), heap.end(), [](const pending& x, const pending& y) { return x.due < y.due; });
  for (const auto& p : heap) b.free(t += 1000, p.addr, p.size);
  return b.take();
}

}  // namespace vram
