// The C API's pools by device index: reading VRAM_DEVICE, counting devices, making pools on first use.
#include "vram/capi/pool_table.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/device/cuda_device.hpp"
#include "vram/device/cuda_driver.hpp"  // cuda_device_count: the seam's free functions
#include "vram/device/sim_device.hpp"

namespace vram::capi {

pool_table::pool_table(const char* device_env) {
  const std::string_view text = device_env != nullptr && *device_env != '\0' ? device_env : "auto";
  auto refuse = [&](status why, const std::exception& e) {
    config_status_ = why;
    std::string what = e.what();
    // parse_device_spec lists the tool's choices; the device index of the C API comes with each call.
    if (const auto at = what.find("cuda or cuda:N)"); at != std::string::npos) what.replace(at, 15, "or cuda)");
    config_error_ = fmt::format("VRAM_DEVICE='{}': {}", text, what);
    count_ = 0;
  };
  try {
    spec_ = parse_device_spec(text);
    if (spec_.which == device_spec::kind::cuda && text.find(':') != std::string_view::npos) {
      throw usage_error("the device index comes with each call; use cuda (CUDA_VISIBLE_DEVICES chooses the GPUs)");
    }
    if (spec_.which != device_spec::kind::sim) {
      std::string why;
      const int n = cuda_device_count(&why);
      if (n > 0) {
        count_ = std::min(n, max_devices);
        simulated_ = false;
      } else if (spec_.which == device_spec::kind::cuda) {
        config_status_ = status::device;
        config_error_ = fmt::format("VRAM_DEVICE='{}': CUDA is not available ({}); use auto or sim", text, why);
        return;
      }
    }
    if (simulated_) {
      sim_ = sim_options(spec_);  // a cost model file that cannot be read is a bad VRAM_DEVICE, told at once
      count_ = sim_device_count;
    }
  } catch (const usage_error& e) {
    refuse(status::invalid_argument, e);
  } catch (const input_error& e) {
    refuse(status::invalid_argument, e);
  } catch (const std::exception& e) {
    refuse(status::internal, e);
  }
}

pool_table::~pool_table() {
  for (auto& slot : entries_) delete slot.exchange(nullptr);  // each pool goes before its device
}

pool_table& pool_table::global() {
  static pool_table* const table = new pool_table(std::getenv("VRAM_DEVICE"));  // never destroyed
  return *table;
}

void pool_table::throw_config_error() const {
  if (config_status_ == status::device) throw device_error(config_error_);
  if (config_status_ == status::invalid_argument) throw usage_error(config_error_);
  throw error(config_error_);
}

int pool_table::device_count() const {
  if (config_status_ != status::success) throw_config_error();
  return count_;
}

void pool_table::check_index(int index) const {
  if (config_status_ != status::success) throw_config_error();
  if (index < 0 || index >= count_) {
    throw usage_error(fmt::format("device {} is out of range: VRAM_DEVICE='{}' gives {} {} device{} (0 to {})", index,
                                  spec_.text, count_, simulated_ ? "simulated" : "CUDA", count_ == 1 ? "" : "s",
                                  count_ - 1));
  }
}

pool_table::entry& pool_table::make(int index) {
  check_index(index);
  std::lock_guard lock(make_mutex_);
  auto& slot = entries_[static_cast<std::size_t>(index)];
  if (entry* e = slot.load(std::memory_order_acquire)) return *e;
  auto e = std::make_unique<entry>();
  if (simulated_) {
    sim_device_options o = sim_;
    o.label = fmt::format("{} #{}", o.label, index);
    o.index = index;  // each simulated device its own addresses, as each GPU has
    e->dev = std::make_unique<sim_device>(o);
  } else {
#if VRAM_HAVE_CUDA_H
    cuda_device_options o;
    o.index = index;
    e->dev = std::make_unique<cuda_device>(o);
#else
    throw device_error("this build of vram has no CUDA device");  // unreachable: count_ is 0 for CUDA here
#endif
  }
  e->name = e->dev->name();
  e->pool = std::make_unique<pool_resource>(*e->dev, pool_options::from_environment());
  slot.store(e.get(), std::memory_order_release);
  return *e.release();
}

const std::string& pool_table::device_name(int index) {
  if (index >= 0 && index < count_) {
    if (entry* e = entries_[static_cast<std::size_t>(index)].load(std::memory_order_acquire)) return e->name;
  }
  return make(index).name;
}

void pool_table::validate() const {
  if (config_status_ == status::success ? count_ <= 0 || count_ > max_devices : count_ != 0) {
    throw invariant_error(fmt::format("pool table: {} devices with configuration status {}", count_,
                                      static_cast<int>(config_status_)));
  }
  for (int i = 0; i < max_devices; ++i) {
    const entry* e = entries_[static_cast<std::size_t>(i)].load(std::memory_order_acquire);
    if (e == nullptr) continue;
    if (i >= count_) throw invariant_error(fmt::format("pool table: a pool at index {}, past the count {}", i, count_));
    if (!e->dev || !e->pool) throw invariant_error(fmt::format("pool table: entry {} lacks its device or pool", i));
    if (&e->pool->upstream_device() != e->dev.get()) {
      throw invariant_error(fmt::format("pool table: the pool at index {} draws on another entry's device", i));
    }
    if (e->dev->simulated() != simulated_) {
      throw invariant_error(fmt::format("pool table: device {} is {} in a {} table", i,
                                        e->dev->simulated() ? "simulated" : "CUDA", simulated_ ? "simulated" : "CUDA"));
    }
    e->pool->validate();
  }
}

}  // namespace vram::capi
