// vram::fit: the binary search of the smallest device, and the check of the capacities above its answer that
// finds a policy whose success is not monotone in capacity. The allocator here takes whole granules from the
// device and can be told to fail on devices of chosen sizes, so every probe's outcome is known by hand.
#include <gtest/gtest.h>

#include <set>
#include <unordered_map>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/replay/fit.hpp"
#include "vram/resource/memory_resource.hpp"

namespace vram {
namespace {

// Each block is a handle of whole 2 MiB granules; on a device whose capacity is in `refuse_on`, every
// allocation fails.
class granule_resource final : public memory_resource {
 public:
  granule_resource(sim_device& d, std::set<std::size_t> refuse_on) : memory_resource(d), sim_(d), refuse_(refuse_on) {}
  std::string_view name() const noexcept override { return "granules"; }
  free_space free_memory() const override { return {}; }

 protected:
  device_ptr do_allocate(std::size_t bytes, stream_id) override {
    if (refuse_.count(sim_.capacity()) != 0) return 0;
    const std::size_t r = round_up(bytes, 2 * MiB);
    const phys_handle h = sim_.mem_create(r);
    if (h == 0) return 0;
    next_ += r;
    live_[next_] = {h, r};
    allocated_ += r;
    reserved_ = allocated_;
    return next_;
  }
  void do_deallocate(device_ptr p, std::size_t, stream_id) override {
    const auto it = live_.find(p);
    sim_.mem_release(it->second.first);
    allocated_ -= it->second.second;
    reserved_ = allocated_;
    live_.erase(it);
  }

 private:
  sim_device& sim_;
  std::set<std::size_t> refuse_;
  std::unordered_map<device_ptr, std::pair<phys_handle, std::size_t>> live_;
  device_ptr next_ = 1 << 30;
};

// One block of 9 MiB: five granules, 10 MiB.
trace one_block() {
  trace t;
  t.name = "one";
  t.events = {{0, 0x1000, 9 * MiB, 0, trace_action::alloc}, {1, 0x1000, 9 * MiB, 0, trace_action::free_requested}};
  return t;
}

fit_options small_device(std::size_t verify) {
  fit_options o;
  o.device.capacity = 64 * MiB;
  o.device.costs = cost_model::zero();
  o.verify_granules = verify;
  return o;
}

resource_factory refusing(std::set<std::size_t> sizes) {
  return [sizes](device& d) { return std::make_unique<granule_resource>(static_cast<sim_device&>(d), sizes); };
}

TEST(Fit, AMonotonePolicyFitsWhereTheSearchEndsAndTheCapacitiesAboveAreChecked) {
  std::vector<std::size_t> tried;
  fit_options o = small_device(3);
  o.progress = [&](int, std::size_t capacity, bool) { tried.push_back(capacity); };
  const fit_result f = fit(one_block(), refusing({}), o);
  // 64 MiB fits and uses 10 MiB; 10 MiB fits; the lower end is 8 MiB (below 9 MiB live): no search is left.
  // Then 12, 14 and 16 MiB are checked, and fit.
  EXPECT_EQ(tried, (std::vector<std::size_t>{64 * MiB, 10 * MiB, 12 * MiB, 14 * MiB, 16 * MiB}));
  ASSERT_TRUE(f.fit_bytes.has_value());
  EXPECT_EQ(*f.fit_bytes, 10 * MiB);
  EXPECT_TRUE(f.monotone);
  EXPECT_EQ(f.lowest_fit_bytes, std::optional<std::size_t>(10 * MiB));
  EXPECT_EQ(f.probes, 5);
  EXPECT_EQ(f.replay.failed_allocations, 0u);
}

TEST(Fit, AFailureAboveTheAnswerMovesItAboveThatFailure) {
  std::vector<std::size_t> tried;
  fit_options o = small_device(3);
  o.progress = [&](int, std::size_t capacity, bool) { tried.push_back(capacity); };
  // Fails on 12 and 16 MiB only. 10 MiB fits; of 12, 14, 16 checked, the highest failure is 16, and the
  // smallest capacity known to fit above it is 64: the search of (16, 64] tries 40, 28, 22 and 18, which all
  // fit. Then 20, 22 (known) and 24 are checked and fit: the answer is 18 MiB; 10 MiB fitted too.
  const fit_result f = fit(one_block(), refusing({12 * MiB, 16 * MiB}), o);
  EXPECT_EQ(tried, (std::vector<std::size_t>{64 * MiB, 10 * MiB, 12 * MiB, 14 * MiB, 16 * MiB, 40 * MiB, 28 * MiB,
                                             22 * MiB, 18 * MiB, 20 * MiB, 24 * MiB}));
  ASSERT_TRUE(f.fit_bytes.has_value());
  EXPECT_EQ(*f.fit_bytes, 18 * MiB);
  EXPECT_FALSE(f.monotone);
  EXPECT_EQ(f.lowest_fit_bytes, std::optional<std::size_t>(10 * MiB));
  EXPECT_EQ(f.probes, 11);
}

TEST(Fit, WithoutTheCheckTheBinarySearchIsTakenAsItIs) {
  const fit_result f = fit(one_block(), refusing({12 * MiB, 16 * MiB}), small_device(0));
  ASSERT_TRUE(f.fit_bytes.has_value());
  EXPECT_EQ(*f.fit_bytes, 10 * MiB);
  EXPECT_TRUE(f.monotone);  // no probe met the failures
  EXPECT_EQ(f.probes, 2);
}

TEST(Fit, AFailureOnTheDeviceTheReplayUsedStartsTheSearchFromTheLargest) {
  // 64 MiB fits using 10 MiB, but 10 MiB fails: the search runs over (8, 64]: 36, 22, 14, 10 (known: fails),
  // 12 fits; then 14 (known), 16 and 18 are checked.
  std::vector<std::size_t> tried;
  fit_options o = small_device(3);
  o.progress = [&](int, std::size_t capacity, bool) { tried.push_back(capacity); };
  const fit_result f = fit(one_block(), refusing({10 * MiB}), o);
  EXPECT_EQ(tried, (std::vector<std::size_t>{64 * MiB, 10 * MiB, 36 * MiB, 22 * MiB, 14 * MiB, 12 * MiB, 16 * MiB,
                                             18 * MiB}));
  EXPECT_EQ(f.fit_bytes, std::optional<std::size_t>(12 * MiB));
  EXPECT_TRUE(f.monotone);
}

TEST(Fit, ATraceThatFailsOnTheLargestDeviceHasNoFit) {
  const fit_result f = fit(one_block(), refusing({64 * MiB}), small_device(3));
  EXPECT_FALSE(f.fit_bytes.has_value());
  EXPECT_FALSE(f.lowest_fit_bytes.has_value());
  EXPECT_EQ(f.probes, 1);
  EXPECT_EQ(f.replay.failed_allocations, 1u);
}

}  // namespace
}  // namespace vram
