// The parts of memory_resource shared by every allocator: the throwing allocate and its message.
#include "vram/resource/memory_resource.hpp"

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"

namespace vram {

device_ptr memory_resource::allocate(std::size_t bytes, stream_id stream) {
  if (bytes == 0) return 0;
  device_ptr p = do_allocate(bytes, stream);
  if (p == 0) throw out_of_memory(out_of_memory_message(bytes, stream));
  return p;
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
