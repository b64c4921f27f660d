// The parts of memory_resource shared by every allocator: the out-of-memory error and its message.
#include "vram/resource/memory_resource.hpp"

#include <fmt/format.h>

#include <limits>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"

namespace vram {

void memory_resource::throw_out_of_memory(std::size_t bytes, stream_id stream) const {
  throw out_of_memory(out_of_memory_message(bytes, stream));
}

void memory_resource::throw_too_large(std::size_t bytes, stream_id stream) const {
  // Past 2^63 the size is most likely a negative number cast to unsigned; below, a size simply too large.
  const bool negative = bytes > std::numeric_limits<std::size_t>::max() / 2;
  throw out_of_memory(fmt::format("{}: out of memory allocating {} bytes on stream {}: no device is that large (a "
                                  "request may be at most {} bytes){}", name(), bytes, stream, max_request_bytes,
                                  negative ? "; is the size a negative number cast to unsigned?" : ""));
}

void memory_resource::throw_bad_free_size(device_ptr p, std::size_t bytes) const {
  throw usage_error(fmt::format("{}: free of {:#x} with size {}: no block is that large (at most {} bytes); the "
                                "allocator is unchanged", name(), p, bytes, max_request_bytes));
}

std::string memory_resource::out_of_memory_message(std::size_t bytes, stream_id stream) const {
  const auto info = device_->mem_info();
  const auto fs = free_memory();
  const double frag = fs.total == 0 ? 0.0 : 1.0 - static_cast<double>(fs.largest) / static_cast<double>(fs.total);
  return fmt::format(
      "{}: out of memory allocating {} bytes on stream {}: the allocator has {} bytes allocated and {} reserved "
      "({} free inside it, largest free block {}, fragmentation {:.1f}%); the device has {} of {} bytes free. "
      "Try freeing cached memory, a smaller request, or a larger device.",
      name(), bytes, stream, allocated_, reserved_, fs.total, fs.largest, 100.0 * frag, info.free, info.total);
}

}  // namespace vram
