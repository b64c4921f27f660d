// From a recorder's operations to traces: sort, pair releases with allocations, split by device.
#include "vram/record/memory_ops.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace vram {

recorded_traces to_traces(std::vector<memory_op> ops, const std::string& name) {
  std::stable_sort(ops.begin(), ops.end(),
                   [](const memory_op& a, const memory_op& b) { return a.timestamp_ns < b.timestamp_ns; });
  recorded_traces out;
  // Per device: the size of each live allocation, for releases that do not carry theirs; the mapped ranges
  // (start -> end); the allocations reported inside them.
  std::map<std::uint32_t, std::unordered_map<std::uint64_t, std::uint64_t>> live;
  std::map<std::uint32_t, std::map<std::uint64_t, std::uint64_t>> mapped;
  std::map<std::uint32_t, std::unordered_map<std::uint64_t, int>> inside_mapped;
  const auto is_mapped = [](const std::map<std::uint64_t, std::uint64_t>& ranges, std::uint64_t addr) {
    auto it = ranges.upper_bound(addr);
    if (it == ranges.begin()) return false;
    --it;
    return addr < it->second;
  };
  for (const memory_op& op : ops) {
    trace& t = out.by_device[op.device];
    if (t.name.empty()) t.name = op.device == 0 ? name : fmt::format("{}.dev{}", name, op.device);
    trace_event e;
    e.time_us = static_cast<std::int64_t>(op.timestamp_ns / 1000);
    e.addr = op.address;
    e.size = op.bytes;
    e.stream = op.stream;
    auto& blocks = live[op.device];
    auto& ranges = mapped[op.device];
    auto& shadows = inside_mapped[op.device];
    switch (op.what) {
      case memory_op::kind::allocate:
        if (is_mapped(ranges, op.address)) {
          ++shadows[op.address];
          ++out.mapped_records;
          continue;
        }
        e.action = trace_action::alloc;
        blocks[op.address] = op.bytes;
        break;
      case memory_op::kind::release: {
        if (const auto s = shadows.find(op.address); s != shadows.end()) {
          if (--s->second == 0) shadows.erase(s);
          ++out.mapped_records;
          continue;
        }
        const auto it = blocks.find(op.address);
        if (it == blocks.end()) {
          ++out.unmatched_releases;
          continue;
        }
        e.action = trace_action::free_requested;
        e.size = it->second;
        blocks.erase(it);
        break;
      }
      case memory_op::kind::map:
        e.action = trace_action::segment_map;
        ranges[op.address] = op.address + op.bytes;
        break;
      case memory_op::kind::unmap:
        e.action = trace_action::segment_unmap;
        ranges.erase(op.address);  // (an unmap from inside a mapping leaves it listed)
        break;
    }
    t.events.push_back(e);
  }
  return out;
}

}  // namespace vram
