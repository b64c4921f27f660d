// Names and totals of device calls, and the device's own clock.
#include "vram/device/device.hpp"

#include <chrono>

namespace vram {

std::string_view to_string(device_call c) noexcept {
  switch (c) {
    case device_call::legacy_malloc: return "legacy_malloc";
    case device_call::legacy_free: return "legacy_free";
    case device_call::mem_create: return "mem_create";
    case device_call::mem_release: return "mem_release";
    case device_call::address_reserve: return "address_reserve";
    case device_call::address_free: return "address_free";
    case device_call::mem_map: return "mem_map";
    case device_call::mem_unmap: return "mem_unmap";
    case device_call::set_access: return "set_access";
    case device_call::event_record: return "event_record";
    case device_call::stream_wait_event: return "stream_wait_event";
    case device_call::event_query: return "event_query";
    case device_call::event_synchronize: return "event_synchronize";
    case device_call::stream_synchronize: return "stream_synchronize";
    case device_call::device_synchronize: return "device_synchronize";
    case device_call::mem_get_info: return "mem_get_info";
    case device_call::count_: break;
  }
  return "unknown";
}

std::uint64_t device_call_stats::total_calls() const noexcept {
  std::uint64_t n = 0;
  for (auto c : count) n += c;
  return n;
}

std::int64_t device::clock_ns() const noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::uint64_t device_call_stats::total_nanoseconds() const noexcept {
  std::uint64_t n = 0;
  for (auto t : nanoseconds) n += t;
  return n;
}

}  // namespace vram
