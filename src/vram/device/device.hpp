#pragma once
// The device seam: everything an allocator asks of a GPU driver, and the only place that talks to one.
// Implementations: sim_device (no GPU; no host memory behind device bytes) and cuda_device.
// Every call is counted by kind with its (modelled or measured) time, so a replay can report driver cost.
// The device also tells allocators the time (now_ns()), which a replay sets to the trace's.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "vram/core/types.hpp"

namespace vram {

/// @brief The kinds of driver call, for counting and cost.
enum class device_call : std::uint8_t {
  legacy_malloc,       // cudaMalloc / cuMemAlloc
  legacy_free,         // cudaFree / cuMemFree
  mem_create,          // cuMemCreate
  mem_release,         // cuMemRelease
  address_reserve,     // cuMemAddressReserve
  address_free,        // cuMemAddressFree
  mem_map,             // cuMemMap
  mem_unmap,           // cuMemUnmap
  set_access,          // cuMemSetAccess
  event_record,        // cuEventRecord
  event_query,         // cuEventQuery
  event_synchronize,   // cuEventSynchronize
  stream_wait_event,   // cuStreamWaitEvent
  stream_synchronize,  // cuStreamSynchronize
  device_synchronize,  // cuCtxSynchronize
  mem_get_info,        // cuMemGetInfo
  count_
};
inline constexpr std::size_t device_call_kinds = static_cast<std::size_t>(device_call::count_);

/// @brief The name of a call kind as used in reports and JSON ("legacy_malloc", "mem_map", ...).
std::string_view to_string(device_call c) noexcept;

/// @brief Calls made through a device, by kind, with their time in nanoseconds.
struct device_call_stats {
  std::array<std::uint64_t, device_call_kinds> count{};
  std::array<std::uint64_t, device_call_kinds> nanoseconds{};

  void add(device_call c, std::uint64_t ns) noexcept {
    count[static_cast<std::size_t>(c)] += 1;
    nanoseconds[static_cast<std::size_t>(c)] += ns;
  }
  std::uint64_t calls(device_call c) const noexcept { return count[static_cast<std::size_t>(c)]; }
  std::uint64_t total_calls() const noexcept;
  std::uint64_t total_nanoseconds() const noexcept;
};

/// @brief What cuMemGetInfo reports.
struct memory_info {
  std::size_t free = 0;
  std::size_t total = 0;
};

/// @brief The one interface to a GPU driver. Errors other than lack of memory throw device_error.
class device {
 public:
  virtual ~device() = default;

  /// @brief A short description, e.g. "simulated H200 (143771 MiB)".
  virtual std::string name() const = 0;
  /// @brief Granularity of physical memory and mappings for the virtual memory API.
  virtual std::size_t granularity() const = 0;
  /// @brief Free and total device memory.
  virtual memory_info mem_info() = 0;
  /// @brief True for the simulated device: times are modelled, not measured.
  virtual bool simulated() const noexcept = 0;

  // Legacy allocation, as cudaMalloc / cudaFree do it.
  /// @brief Returns a block of at least @p bytes (aligned to 512), or 0 when the device has too little memory.
  virtual device_ptr legacy_malloc(std::size_t bytes) = 0;
  /// @brief pre: @p p came from legacy_malloc and was not freed (else device_error).
  virtual void legacy_free(device_ptr p) = 0;

  // The virtual memory API.
  /// @brief Reserves @p bytes of address space (a multiple of granularity()). Never 0.
  virtual device_ptr address_reserve(std::size_t bytes, std::size_t alignment = 0) = 0;
  /// @brief pre: the whole reservation, with nothing mapped in it.
  virtual void address_free(device_ptr va, std::size_t bytes) = 0;
  /// @brief Physical memory of @p bytes (a multiple of granularity()), or 0 when the device has too little.
  virtual phys_handle mem_create(std::size_t bytes) = 0;
  /// @brief Releases a handle; its memory returns to the device once no mapping holds it.
  virtual void mem_release(phys_handle h) = 0;
  /// @brief Maps the whole of handle @p h at @p va. pre: va inside a reservation, range not mapped, bytes == size of h.
  virtual void mem_map(device_ptr va, std::size_t bytes, phys_handle h) = 0;
  /// @brief Unmaps every mapping inside [va, va + bytes). pre: the range covers whole mappings.
  virtual void mem_unmap(device_ptr va, std::size_t bytes) = 0;
  /// @brief Makes the mapped range readable and writable from this device (and its peers, where asked).
  virtual void set_access(device_ptr va, std::size_t bytes) = 0;

  // Streams and events.
  virtual event_id event_create() = 0;
  virtual void event_destroy(event_id e) = 0;
  /// @brief Marks the point in @p s's queue that has been reached when the event completes.
  virtual void event_record(event_id e, stream_id s) = 0;
  /// @brief True when the work the event marks is complete. Never waits.
  virtual bool event_query(event_id e) = 0;
  virtual void event_synchronize(event_id e) = 0;
  /// @brief Work queued on @p s from now on starts only once the work @p e marks is complete; the host does
  /// not wait (cuStreamWaitEvent). The event may be recorded again at once. A device without the call waits
  /// on the host instead (event_synchronize).
  virtual void stream_wait_event(stream_id s, event_id e) {
    (void)s;
    event_synchronize(e);
  }
  virtual void stream_synchronize(stream_id s) = 0;
  virtual void device_synchronize() = 0;

  /// @brief The calls made so far, by kind, with their time.
  const device_call_stats& calls() const noexcept { return calls_; }
  void reset_calls() noexcept { calls_ = {}; }

  // Time, as allocators see it. A pool that decides from time (how fast it is mapping memory) reads it here,
  // so that in a replay it sees the trace's time, on the simulated device and on a GPU alike.
  /// @brief Nanoseconds from an arbitrary start: the time last given to set_time(), else the device's own
  /// clock (the steady clock on a GPU; 0 on the simulated device, whose time moves only when it is set).
  std::int64_t now_ns() const noexcept {
    const std::int64_t t = set_ns_.load(std::memory_order_relaxed);
    return t != unset ? t : clock_ns();
  }
  /// @brief now_ns() returns @p ns until set again or follow_clock() (a replay sets each row's time).
  void set_time(std::int64_t ns) noexcept { set_ns_.store(ns == unset ? unset + 1 : ns, std::memory_order_relaxed); }
  /// @brief now_ns() follows the device's own clock again.
  void follow_clock() noexcept { set_ns_.store(unset, std::memory_order_relaxed); }

 protected:
  /// @brief The device's own clock: the steady clock, unless an implementation has another.
  virtual std::int64_t clock_ns() const noexcept;

  device_call_stats calls_;

 private:
  static constexpr std::int64_t unset = INT64_MIN;
  std::atomic<std::int64_t> set_ns_{unset};
};

}  // namespace vram
