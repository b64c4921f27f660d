#include "vram/decorators/limit_resource.hpp"

#include <fmt/format.h>

#include "vram/core/size.hpp"

namespace vram {

std::string limit_resource::out_of_memory_message(std::size_t bytes, stream_id stream) const {
  if (charge(bytes) > limit_ - used_)
    return fmt::format("{}: cannot allocate {} on stream {}: {} are live through a limit of {}, so {} more would "
                       "pass it (limit_resource; free blocks or raise the limit)",
                       name(), format_bytes(bytes), stream, format_bytes(used_), format_bytes(limit_),
                       format_bytes(charge(bytes)));
  return resource_adaptor::out_of_memory_message(bytes, stream);
}

}  // namespace vram
