#pragma once
// What a driver-level recorder saw (vram record, src/vram/integrations/cupti_recorder.cpp), turned into
// traces: device-memory allocations and releases (cudaMalloc, cudaMallocAsync and pools, cuMemAlloc, ...)
// become alloc / free_requested events, and virtual-memory mappings (cuMemMap / cuMemUnmap) become
// segment_map / segment_unmap, one trace per device, in time order. Free of CUDA, so it is tested anywhere.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vram/trace/trace.hpp"

namespace vram {

struct memory_op {
  enum class kind : std::uint8_t { allocate, release, map, unmap };
  std::uint64_t timestamp_ns = 0;
  kind what = kind::allocate;
  std::uint32_t device = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;   // 0 on a release that did not say: the allocation's size is used
  std::uint64_t stream = 0;  // 0 for a synchronous operation
};

struct recorded_traces {
  std::map<std::uint32_t, trace> by_device;
  std::uint64_t unmatched_releases = 0;  // releases of an address never allocated in the recording
  std::uint64_t mapped_records = 0;      // allocations (and their releases) inside a mapped range: left out
};

/// @brief The traces of @p ops, sorted by time (stably: ops of one time keep their order); times in
/// microseconds. A release of an address not allocated in the recording is dropped and counted. An
/// allocation at an address inside a range mapped at that time, with its release, is dropped and counted:
/// CUPTI reports mapped memory both as the mapping and as such an allocation.
recorded_traces to_traces(std::vector<memory_op> ops, const std::string& name);

}  // namespace vram
