#pragma once
// The simulated device: implements the device seam with bookkeeping only, so a 140 GiB GPU costs a few MiB
// of host memory. Legacy malloc packs blocks as the H200 was seen to (docs/device.md): sizes round up to
// 512 bytes; blocks up to 1 MiB share 2 MiB pages, one page per rounded size, and a page is given back
// only when all its blocks are freed; larger blocks take whole 2 MiB pages of their own. The virtual memory
// API checks its contracts (mapping inside a reservation, no double mapping, whole handles) and throws
// device_error where a real driver would fail. Each call adds its modelled cost to calls().
// Streams: any stream_id is accepted. Work completes at once (or, with options.lag_ns, that long after it was
// queued, in the device's time) unless a test holds a stream (hold()); events
// recorded on a held stream complete at release() or when synchronized (legacy_free synchronizes the whole
// device, as cudaFree does); a stream made to wait for an event (stream_wait_event) completes what it queues
// after that only once the event does. Thread-safe (one mutex).

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "vram/device/cost_model.hpp"
#include "vram/device/device.hpp"

namespace vram {

struct sim_device_options {
  std::size_t capacity = std::size_t{143771} * MiB;  // an H200's total memory
  std::size_t granularity = 2 * MiB;
  cost_model costs = cost_model::h200();
  std::string label = "simulated H200";
  /// How far the device runs behind the host: work queued on a stream not held completes this many
  /// nanoseconds of the device's time (now_ns(), which a replay sets to the trace's) after it was queued.
  /// 0: at once. A GPU runs behind the host by the kernels queued ahead; a lag makes frees whose memory
  /// must wait for the device (an unmap behind a fence) wait in a replay too.
  std::int64_t lag_ns = 0;
  /// Which device this is when several are simulated: each gets its own 2^48-byte window of addresses, so
  /// no two simulated devices hand out the same address (as no two GPUs of a process do).
  int index = 0;
};

/// @brief A piece of device memory handed out, as `vram report` draws the address space.
struct device_region {
  enum class kind : std::uint8_t {
    legacy_page,   // a 2 MiB page shared by legacy blocks of up to 1 MiB
    legacy_block,  // a legacy block of its own pages (a multiple of 2 MiB)
    mapping        // a physical handle mapped into a reservation
  };
  device_ptr va = 0;
  std::size_t bytes = 0;
  kind what = kind::mapping;
  phys_handle handle = 0;  // mappings only

  bool operator==(const device_region&) const = default;
};

class sim_device final : public device {
 public:
  /// @brief The most memory a simulated device holds: its cudaMalloc range below its VMM range (63 TiB).
  static constexpr std::size_t max_capacity = (std::size_t{1} << 46) - (std::size_t{1} << 40);

  /// @throws usage_error for a capacity of 0 or above max_capacity, or a granularity that is no power of two.
  explicit sim_device(sim_device_options options = {});
  ~sim_device() override;

  std::string name() const override;
  std::size_t granularity() const override { return options_.granularity; }
  memory_info mem_info() override;
  bool simulated() const noexcept override { return true; }

  device_ptr legacy_malloc(std::size_t bytes) override;
  void legacy_free(device_ptr p) override;

  device_ptr address_reserve(std::size_t bytes, std::size_t alignment = 0) override;
  void address_free(device_ptr va, std::size_t bytes) override;
  phys_handle mem_create(std::size_t bytes) override;
  void mem_release(phys_handle h) override;
  void mem_map(device_ptr va, std::size_t bytes, phys_handle h) override;
  void mem_unmap(device_ptr va, std::size_t bytes) override;
  void set_access(device_ptr va, std::size_t bytes) override;

  event_id event_create() override;
  void event_destroy(event_id e) override;
  void event_record(event_id e, stream_id s) override;
  bool event_query(event_id e) override;
  void event_synchronize(event_id e) override;
  void stream_wait_event(stream_id s, event_id e) override;
  void stream_synchronize(stream_id s) override;
  void device_synchronize() override;

  // Test controls, not part of the seam.
  /// @brief Holds @p s's work in flight: events recorded on it stay incomplete until release(s).
  void hold(stream_id s);
  /// @brief Completes all work queued on @p s and stops holding it.
  void release(stream_id s);

  /// @brief Device bytes in use: legacy pages plus physical handles not yet freed.
  std::size_t used_bytes() const;
  std::size_t capacity() const noexcept { return options_.capacity; }
  /// @brief Peak of used_bytes() since construction.
  std::size_t peak_used_bytes() const;
  /// @brief Every legacy page and block and every mapping, by address (O(state)).
  std::vector<device_region> regions() const;
  /// @brief Checks all of the bookkeeping (pages, address ranges, mappings, handles, streams); throws
  /// invariant_error naming the broken invariant. O(state): for tests, not for every call.
  void validate() const;

 protected:
  /// The simulated device has no clock of its own: its time is 0 until set_time() moves it, so every run
  /// on it repeats exactly.
  std::int64_t clock_ns() const noexcept override { return 0; }

 private:
  struct impl;
  sim_device_options options_;
  std::unique_ptr<impl> impl_;
  mutable std::mutex mutex_;
};

}  // namespace vram
