#pragma once
// Writes every allocation and free that passes through to the upstream resource into a trace in vram's
// format (trace_recorder), as VRAM_RECORD does for libvram.so: `alloc` and `free_requested` rows with the
// address the upstream gave, the requested size and the stream, and an `oom` row for a request it could not
// serve. Times are the device's (now_ns(): the steady clock on a GPU, the trace's in a replay). `vram
// replay` of the file reproduces what the program held. Not thread-safe: put a thread_safe_resource above it.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "vram/decorators/resource_adaptor.hpp"
#include "vram/trace/trace_recorder.hpp"

namespace vram {

class tracing_resource final : public resource_adaptor {
 public:
  /// @brief Records into @p recorder, which must outlive this resource.
  tracing_resource(memory_resource& upstream, trace_recorder& recorder) noexcept
      : resource_adaptor(upstream), recorder_(recorder) {}
  /// @brief Owns both its upstream and its recorder.
  tracing_resource(std::unique_ptr<memory_resource> upstream, std::unique_ptr<trace_recorder> recorder) noexcept
      : resource_adaptor(std::move(upstream)), owned_(std::move(recorder)), recorder_(*owned_) {}

  trace_recorder& recorder() const noexcept { return recorder_; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id stream) override;
  void do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) override;

 private:
  std::int64_t now_us() const noexcept;
  std::unique_ptr<trace_recorder> owned_;  // null when the recorder belongs to the caller
  trace_recorder& recorder_;
};

}  // namespace vram
