// cudaMallocAsync as a bench target (cuda_async_target.hpp), over the device seam's cuda_async_pool.
#include "vram/measure/cuda_async_target.hpp"

#include "vram/device/cuda_async_pool.hpp"

namespace vram::measure {

namespace {

class cuda_async_worker final : public bench_worker {
 public:
  explicit cuda_async_worker(const cuda_async_pool& pool) : stream_(pool) {}

  std::uint64_t pairs(std::size_t bytes, std::uint64_t n) override {
    std::uint64_t folded = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const device_ptr p = stream_.allocate(bytes);
      detail::keep(p);
      folded ^= p;
      stream_.deallocate(p);
    }
    return folded;
  }

 private:
  cuda_async_pool::stream stream_;
};

class cuda_async_target final : public bench_target {
 public:
  explicit cuda_async_target(device& dev) : pool_(dev) {}

  std::string_view name() const noexcept override { return "cudaMallocAsync"; }
  std::string note() const override {
    return "cudaMallocAsync: cuMemAllocAsync/cuMemFreeAsync on the device's default pool, release threshold at "
           "its maximum, one non-blocking stream per thread";
  }
  std::unique_ptr<bench_worker> make_worker() override { return std::make_unique<cuda_async_worker>(pool_); }

 private:
  cuda_async_pool pool_;
};

}  // namespace

std::unique_ptr<bench_target> make_cuda_async_target(device& dev) { return std::make_unique<cuda_async_target>(dev); }

}  // namespace vram::measure
