#include "vram/decorators/tracing_resource.hpp"

#include "vram/device/device.hpp"

namespace vram {

std::int64_t tracing_resource::now_us() const noexcept { return upstream_device().now_ns() / 1000; }

device_ptr tracing_resource::do_allocate(std::size_t bytes, stream_id stream) {
  const device_ptr p = resource_adaptor::do_allocate(bytes, stream);
  const trace_event e{now_us(), p, bytes, stream, p == 0 ? trace_action::oom : trace_action::alloc};
  try {
    recorder_.record(e);
  } catch (...) {
    // A block the trace does not show would make the trace lie: give it back, and say why.
    if (p != 0) resource_adaptor::do_deallocate(p, bytes, stream);
    throw;
  }
  return p;
}

void tracing_resource::do_deallocate(device_ptr p, std::size_t bytes, stream_id stream) {
  resource_adaptor::do_deallocate(p, bytes, stream);  // a bad free throws here and is not recorded
  recorder_.record({now_us(), p, bytes, stream, trace_action::free_requested});
}

}  // namespace vram
