// The bench targets over malloc, a memory_resource and the device's legacy calls (host_targets.hpp).
// Decisions:
//  - Each worker's loop is the allocator's calls and nothing else: no statistics, no per-pair clock.
//  - A failed allocation throws (out_of_memory), so a cell that cannot run says why instead of timing nulls.
//  - A resource that is not thread-safe is put under a thread_safe_resource (one mutex, taken once per call);
//    the pair is not made atomic.
#include "vram/measure/host_targets.hpp"

#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/decorators/thread_safe_resource.hpp"
#include "vram/device/device.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram::measure {

namespace {

// ---- glibc ------------------------------------------------------------------------------------------------

class glibc_worker final : public bench_worker {
 public:
  std::uint64_t pairs(std::size_t bytes, std::uint64_t n) override {
    std::uint64_t folded = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      void* p = std::malloc(bytes);
      if (p == nullptr) throw out_of_memory(fmt::format("glibc: malloc({}) returned null", format_bytes(bytes)));
      const auto v = reinterpret_cast<std::uintptr_t>(p);
      detail::keep(v);
      folded ^= v;
      std::free(p);
    }
    return folded;
  }
};

class glibc_target final : public bench_target {
 public:
  std::string_view name() const noexcept override { return "glibc"; }
  std::unique_ptr<bench_worker> make_worker() override { return std::make_unique<glibc_worker>(); }
};

// ---- a memory_resource --------------------------------------------------------------------------------------

class resource_worker final : public bench_worker {
 public:
  explicit resource_worker(memory_resource& r) : resource_(r) {}

  std::uint64_t pairs(std::size_t bytes, std::uint64_t n) override {
    std::uint64_t folded = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const device_ptr p = resource_.allocate(bytes);
      detail::keep(p);
      folded ^= p;
      resource_.deallocate(p, bytes);
    }
    return folded;
  }

 private:
  memory_resource& resource_;
};

class resource_target final : public bench_target {
 public:
  resource_target(std::string name, std::unique_ptr<memory_resource> r, sharing how)
      : name_(std::move(name)), resource_(std::move(r)), how_(how) {
    if (how_ == sharing::mutex) guarded_ = std::make_unique<thread_safe_resource>(*resource_);
  }

  std::string_view name() const noexcept override { return name_; }
  std::string note() const override {
    if (how_ == sharing::concurrent) return {};
    return fmt::format("{} is not thread-safe: the bench puts one mutex around each of its calls, shared by the "
                       "threads", name_);
  }
  std::unique_ptr<bench_worker> make_worker() override {
    return std::make_unique<resource_worker>(guarded_ ? *guarded_ : *resource_);
  }

 private:
  std::string name_;
  std::unique_ptr<memory_resource> resource_;
  sharing how_;
  std::unique_ptr<thread_safe_resource> guarded_;  // over resource_, where it is not thread-safe
};

// ---- the device's legacy calls -----------------------------------------------------------------------------

class legacy_worker final : public bench_worker {
 public:
  explicit legacy_worker(device& dev) : dev_(dev) {}

  std::uint64_t pairs(std::size_t bytes, std::uint64_t n) override {
    std::uint64_t folded = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const device_ptr p = dev_.legacy_malloc(bytes);
      if (p == 0) {
        throw out_of_memory(fmt::format("{}: legacy_malloc({}) found too little free memory", dev_.name(),
                                        format_bytes(bytes)));
      }
      detail::keep(p);
      folded ^= p;
      dev_.legacy_free(p);
    }
    return folded;
  }

 private:
  device& dev_;
};

class legacy_target final : public bench_target {
 public:
  legacy_target(std::string name, device& dev) : name_(std::move(name)), dev_(dev) {}
  std::string_view name() const noexcept override { return name_; }
  std::unique_ptr<bench_worker> make_worker() override { return std::make_unique<legacy_worker>(dev_); }

 private:
  std::string name_;
  device& dev_;
};

}  // namespace

std::unique_ptr<bench_target> make_glibc_target() { return std::make_unique<glibc_target>(); }

std::unique_ptr<bench_target> make_resource_target(std::string name, std::unique_ptr<memory_resource> resource,
                                                   sharing how) {
  return std::make_unique<resource_target>(std::move(name), std::move(resource), how);
}

std::unique_ptr<bench_target> make_legacy_target(std::string name, device& dev) {
  return std::make_unique<legacy_target>(std::move(name), dev);
}

}  // namespace vram::measure
