// The classic alternating pattern: small blocks side by side, every other one freed. The holes are too small
// for the next, larger requests, so an allocator that cannot move memory must find fresh space for them.
#include <vector>

#include "vram/core/types.hpp"
#include "vram/workload/trace_builder.hpp"
#include "vram/workload/workload.hpp"

namespace vram {

trace make_alternating_workload(const workload_options&) {
  trace_builder b("alternating");
  std::int64_t t = 0;
  std::vector<std::uint64_t> small;
  for (int i = 0; i < 1000; ++i) small.push_back(b.alloc(t++, 1 * KiB));
  for (int i = 0; i < 1000; i += 2) b.free(t++, small[i], 1 * KiB);
  std::vector<std::uint64_t> larger;
  for (int i = 0; i < 500; ++i) larger.push_back(b.alloc(t++, 2 * KiB));
  for (int i = 1; i < 1000; i += 2) b.free(t++, small[i], 1 * KiB);
  for (auto a : larger) b.free(t++, a, 2 * KiB);
  return b.take();
}

}  // namespace vram
