#pragma once
// PyTorch's memory snapshot (torch.cuda.memory._snapshot(), pickled by _dump_snapshot): a dict whose
// `device_traces` holds, per device, the allocator's recent events (`action`, `addr`, `size`, `stream`,
// `time_us`, `frames`, ...) and whose `segments` hold the allocator's state when the snapshot was taken.
// Frames and the other keys are ignored.
//
// A snapshot rarely starts with an empty allocator: recording may begin after the program allocated, and
// the ring buffer (`max_entries`) drops the oldest events. What is missing is inferred and said in notes:
//  - a block freed in the trace but never allocated in it, or live in `segments` but not allocated in the
//    trace, was live before the first event: an alloc at the first event's time is added for it;
//  - likewise a segment freed (or unmapped) but never made in the trace, or present in `segments` and not
//    made in it: a segment_alloc (segment_map) at the first event's time;
//  - a free_completed whose block the trace never saw allocated or freed is dropped;
//  - entries of other actions (`user_defined`) are skipped; times that go back are clamped.

#include <string>
#include <vector>

#include "vram/trace/pickle.hpp"
#include "vram/trace/trace.hpp"

namespace vram::detail {

struct snapshot_device_trace {
  int device = 0;
  std::vector<trace_event> events;
  std::vector<std::string> notes;  // what was inferred, one sentence each
};

/// @brief What read_pickle should compact as it reads a snapshot: each trace entry into a record, its stack
/// frames dropped (pass it to read_pickle; read_torch_snapshot takes records and dicts alike).
const pickle_records& snapshot_records() noexcept;

/// @brief The trace of every device with entries in the snapshot, in device order.
/// @throws input_error "PATH: device_traces[D][I]: problem" for a pickle that is not a memory snapshot.
std::vector<snapshot_device_trace> read_torch_snapshot(const pickle_tree& tree, const std::string& path);

}  // namespace vram::detail
