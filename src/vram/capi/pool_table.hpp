#pragma once
// The C API's pools: one vram pool per device index, made on first use and kept for the life of the process.
//
// Policy decisions:
//  - What stands behind the indices is chosen once, from VRAM_DEVICE: "auto" (the default; CUDA device N
//    when a GPU is usable, else simulated device N), "sim", "sim:CAPACITY" (either with ",costs=FILE": a
//    cost model file, read once, when the table is made) or "cuda". The count is the driver's device count
//    for CUDA and sim_device_count for the simulated devices. "cuda:N" is refused:
//    the index comes with each call (CUDA_VISIBLE_DEVICES chooses which GPUs a process sees).
//  - A malformed VRAM_DEVICE, or "cuda" where no GPU is usable, is remembered and reported by every call.
//  - A pool is made under one mutex, the first time its index is used, with pool_options::from_environment();
//    after that, finding it is one atomic load. When making it fails the slot stays empty, and the next
//    call tries again.
//  - Pools and devices are never destroyed: a program may free blocks from its own static destructors, and
//    the CUDA driver may already be shutting down when ours would run; the process's exit gives all memory
//    back.
//  - Simulated devices all number their addresses from the same base, so a free on the wrong simulated
//    device is caught only when that device's pool holds no block at that address. CUDA addresses are
//    unique across devices (unified addressing), so there it is always caught.

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "vram/device/device.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/pool/pool_resource.hpp"

namespace vram::capi {

/// Simulated devices offered when no GPU stands behind the indices (one node of eight GPUs).
inline constexpr int sim_device_count = 8;
/// The most device indices the table holds; a driver that counts more offers the first max_devices.
inline constexpr int max_devices = 64;

/// @brief The status codes of the C API, as exceptions map to them (include/vram/vram.h lists them).
enum class status : int { success = 0, out_of_memory = 1, invalid_argument = 2, device = 3, internal = 4 };

/// @brief Pools by device index, over the devices one VRAM_DEVICE value names. Thread-safe.
class pool_table {
 public:
  /// @brief A table over the devices @p device_env names ("" or null: auto). Never throws: a bad value
  /// is reported by device_count() and pool().
  explicit pool_table(const char* device_env);
  ~pool_table();
  pool_table(const pool_table&) = delete;
  pool_table& operator=(const pool_table&) = delete;

  /// @brief The table the C API uses: over getenv("VRAM_DEVICE") at its first use; never destroyed.
  static pool_table& global();

  /// @brief The number of device indices. @throws usage_error / device_error when VRAM_DEVICE is unusable.
  int device_count() const;
  /// @brief True when the table's devices are simulated.
  bool simulated() const noexcept { return simulated_; }
  /// @brief Checks @p index against the count. @throws usage_error naming the index and the valid range,
  /// or the configuration error.
  void check_index(int index) const;
  /// @brief The pool of device @p index, made on first use. @throws as check_index, and whatever making
  /// the device or the pool throws (device_error, usage_error for a bad pool setting).
  pool_resource& pool(int index) {
    if (index >= 0 && index < count_) {
      if (entry* e = entries_[static_cast<std::size_t>(index)].load(std::memory_order_acquire)) return *e->pool;
    }
    return make(index).pool_ref();
  }
  /// @brief The pool of device @p index if it has been made, else null. pre: 0 <= index < max_devices.
  pool_resource* existing(int index) const noexcept {
    entry* e = entries_[static_cast<std::size_t>(index)].load(std::memory_order_acquire);
    return e == nullptr ? nullptr : e->pool.get();
  }
  /// @brief The description of device @p index (its pool is made if need be); lives as long as the table.
  const std::string& device_name(int index);

  /// @brief Checks that every pool made sits at an index below the count, over its own device, and
  /// passes its own validate(). @throws invariant_error naming the broken invariant.
  void validate() const;

 private:
  struct entry {
    std::unique_ptr<device> dev;
    std::unique_ptr<pool_resource> pool;
    std::string name;
    pool_resource& pool_ref() const noexcept { return *pool; }
  };
  entry& make(int index);
  [[noreturn]] void throw_config_error() const;

  device_spec spec_;
  sim_device_options sim_;          // the simulated devices' options (a cost model file read once, at start)
  int count_ = 0;                   // 0 when config_error_ is set
  bool simulated_ = true;
  status config_status_ = status::success;
  std::string config_error_;        // why the devices cannot be had
  std::array<std::atomic<entry*>, max_devices> entries_{};
  std::mutex make_mutex_;           // serializes making pools
};

}  // namespace vram::capi
