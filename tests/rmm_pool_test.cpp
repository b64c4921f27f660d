// rmm-pool: the initial pool, each growth step, best fit, coalescing (never across upstream blocks), the
// maximum pool size, out of memory, stream ordering, bad frees, and a seeded comparison against a plain
// re-statement of RMM's rules. Expected figures are worked out by hand in the comments.
// On the simulated device, blocks above 1 MiB take whole 2 MiB pages laid out from one address upward, so
// upstream blocks of whole MiB multiples of 2 sit next to each other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "vram/core/error.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/emulation/rmm_pool_resource.hpp"

namespace vram {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using blocks = std::vector<std::pair<device_ptr, std::size_t>>;

sim_device_options small_device(std::size_t capacity) {
  sim_device_options o;
  o.capacity = capacity;
  o.costs = cost_model::zero();
  o.label = "test device";
  return o;
}

rmm_pool_options pool_of(std::size_t initial, std::optional<std::size_t> maximum = std::nullopt) {
  rmm_pool_options o;
  o.initial_pool_size = initial;
  o.maximum_pool_size = maximum;
  return o;
}

std::uint64_t calls(const device& d, device_call c) { return d.calls().calls(c); }

TEST(rmm_pool, initial_pool_defaults_to_half_of_free_device_memory) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev);
  // 64 MiB free / 2 = 32 MiB, already a multiple of 512.
  EXPECT_EQ(pool.pool_size(), 32 * MiB);
  EXPECT_EQ(pool.reserved_bytes(), 32 * MiB);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
  EXPECT_THAT(pool.upstream_block_sizes(), ElementsAre(32 * MiB));
  EXPECT_EQ(dev.used_bytes(), 32 * MiB);
  EXPECT_EQ(pool.free_memory().total, 32 * MiB);
  EXPECT_EQ(pool.free_memory().largest, 32 * MiB);
  pool.validate();
}

TEST(rmm_pool, grows_by_the_larger_of_request_and_pool_then_halves_on_refusal) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(4 * MiB));

  // a: 3 MiB from the 4 MiB pool; 1 MiB left free.
  const device_ptr a = pool.allocate(3 * MiB);
  EXPECT_EQ(pool.pool_size(), 4 * MiB);
  // b: 2 MiB does not fit the 1 MiB hole: grow by max(2, 4) = 4 MiB -> pool 8 MiB; 2 MiB of it left free.
  const device_ptr b = pool.allocate(2 * MiB);
  EXPECT_EQ(pool.pool_size(), 8 * MiB);
  // c: 6 MiB: grow by max(6, 8) = 8 MiB -> pool 16 MiB; 2 MiB left free.
  const device_ptr c = pool.allocate(6 * MiB);
  EXPECT_EQ(pool.pool_size(), 16 * MiB);
  // d: 20 MiB: grow by max(20, 16) = 20 MiB -> pool 36 MiB, nothing left over.
  const device_ptr d = pool.allocate(20 * MiB);
  EXPECT_EQ(pool.pool_size(), 36 * MiB);
  EXPECT_EQ(dev.used_bytes(), 36 * MiB);

  // e: 10 MiB: the ask max(10, 36) = 36 MiB is refused (64 - 36 = 28 MiB free); halved to max(10, 18) = 18 MiB,
  // which the device gives -> pool 54 MiB, 8 MiB of it left free. Two legacy_malloc calls.
  const auto mallocs = calls(dev, device_call::legacy_malloc);
  const device_ptr e = pool.allocate(10 * MiB);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc) - mallocs, 2u);
  EXPECT_EQ(pool.pool_size(), 54 * MiB);
  EXPECT_THAT(pool.upstream_block_sizes(), ElementsAre(4 * MiB, 4 * MiB, 8 * MiB, 20 * MiB, 18 * MiB));
  EXPECT_THAT(pool.free_blocks(), ElementsAre(Pair(a + 3 * MiB, 1 * MiB), Pair(b + 2 * MiB, 2 * MiB),
                                              Pair(c + 6 * MiB, 2 * MiB), Pair(e + 10 * MiB, 8 * MiB)));
  EXPECT_EQ(pool.allocated_bytes(), 41 * MiB);  // 3 + 2 + 6 + 20 + 10
  (void)d;
  pool.validate();

  // f: 12 MiB fits no free block (1, 2, 2, 8). Asks: 54, 27, max(12, 13.5) = 13.5, then 12 MiB, each refused
  // (10 MiB free on the device); the pool is left as it was.
  const auto before = calls(dev, device_call::legacy_malloc);
  EXPECT_EQ(pool.try_allocate(12 * MiB), 0u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc) - before, 4u);
  EXPECT_EQ(pool.pool_size(), 54 * MiB);
  EXPECT_THROW(pool.allocate(12 * MiB), out_of_memory);
  pool.validate();

  // The 8 MiB hole still serves 8 MiB exactly.
  EXPECT_EQ(pool.allocate(8 * MiB), e + 10 * MiB);
  pool.validate();
}

TEST(rmm_pool, best_fit_takes_the_smallest_block_that_fits) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(16 * MiB));
  // Holes of 3 KiB, 1 KiB and 2 KiB, kept apart by live 512 B blocks, then the tail of the pool.
  const device_ptr h3 = pool.allocate(3 * KiB);
  pool.allocate(512);
  const device_ptr h1 = pool.allocate(1 * KiB);
  pool.allocate(512);
  const device_ptr h2 = pool.allocate(2 * KiB);
  pool.allocate(512);
  pool.deallocate(h3, 3 * KiB);
  pool.deallocate(h1, 1 * KiB);
  pool.deallocate(h2, 2 * KiB);
  pool.validate();

  // 1536 B (a multiple of 512): the 1 KiB hole is too small; 2 KiB is the smallest that fits.
  EXPECT_EQ(pool.allocate(1536), h2);
  // 1 KiB: fits the 1 KiB hole exactly (the 512 B left of h2 is too small).
  EXPECT_EQ(pool.allocate(1 * KiB), h1);
  // 700 B rounds to 1 KiB: the holes are 512 B (too small), 3 KiB and the tail: 3 KiB wins.
  EXPECT_EQ(pool.allocate(700), h3);
  EXPECT_EQ(pool.allocated_bytes(), 1536u + 1024 + 1024 + 3 * 512);
  // 512 B: two 512 B-or-larger candidates are h2 + 1536 (512 B) and h3 + 1 KiB (2 KiB): the exact one.
  EXPECT_EQ(pool.allocate(512), h2 + 1536);
  pool.validate();
}

TEST(rmm_pool, equal_sizes_go_to_the_lowest_address) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(16 * MiB));
  const device_ptr x = pool.allocate(1 * KiB);
  pool.allocate(512);
  const device_ptr y = pool.allocate(1 * KiB);
  pool.allocate(512);
  pool.deallocate(y, 1 * KiB);  // freed first, but higher
  pool.deallocate(x, 1 * KiB);
  EXPECT_EQ(pool.allocate(1 * KiB), x);
  EXPECT_EQ(pool.allocate(1 * KiB), y);
}

TEST(rmm_pool, freed_neighbours_coalesce) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(16 * MiB));
  const device_ptr a = pool.allocate(1 * KiB);
  const device_ptr b = pool.allocate(1 * KiB);
  const device_ptr c = pool.allocate(1 * KiB);
  ASSERT_EQ(b, a + 1 * KiB);
  ASSERT_EQ(c, b + 1 * KiB);
  const std::size_t tail = 16 * MiB - 3 * KiB;

  pool.deallocate(a, 1 * KiB);  // a stands alone: b is live
  EXPECT_THAT(pool.free_blocks(), ElementsAre(Pair(a, 1 * KiB), Pair(c + 1 * KiB, tail)));
  pool.deallocate(c, 1 * KiB);  // c merges with the tail that follows it
  EXPECT_THAT(pool.free_blocks(), ElementsAre(Pair(a, 1 * KiB), Pair(c, tail + 1 * KiB)));
  pool.deallocate(b, 1 * KiB);  // b joins both: the whole pool is one block again
  EXPECT_THAT(pool.free_blocks(), ElementsAre(Pair(a, 16 * MiB)));
  EXPECT_EQ(pool.free_memory().largest, 16 * MiB);
  pool.validate();
}

TEST(rmm_pool, never_coalesces_across_upstream_blocks) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(2 * MiB));
  const device_ptr x = pool.allocate(2 * MiB);  // the whole first upstream block
  const device_ptr y = pool.allocate(2 * MiB);  // grow by max(2, 2) = 2 MiB
  ASSERT_EQ(y, x + 2 * MiB) << "the simulated device should place the two upstream blocks side by side";
  pool.deallocate(x, 2 * MiB);
  pool.deallocate(y, 2 * MiB);  // y's free neighbour x precedes it
  // Contiguous in address, but y heads its own upstream block: two free blocks.
  EXPECT_THAT(pool.free_blocks(), ElementsAre(Pair(x, 2 * MiB), Pair(y, 2 * MiB)));
  // The other order: x's free neighbour y follows it. Still two blocks.
  EXPECT_EQ(pool.allocate(2 * MiB), x);  // equal sizes: the lower address
  EXPECT_EQ(pool.allocate(2 * MiB), y);
  pool.deallocate(y, 2 * MiB);
  pool.deallocate(x, 2 * MiB);
  EXPECT_THAT(pool.free_blocks(), ElementsAre(Pair(x, 2 * MiB), Pair(y, 2 * MiB)));
  EXPECT_EQ(pool.free_memory().total, 4 * MiB);
  EXPECT_EQ(pool.free_memory().largest, 2 * MiB);
  // So 4 MiB fits neither: the pool grows by max(4, 4) = 4 MiB.
  pool.allocate(4 * MiB);
  EXPECT_EQ(pool.pool_size(), 8 * MiB);
  EXPECT_THAT(pool.upstream_block_sizes(), ElementsAre(2 * MiB, 2 * MiB, 4 * MiB));
  pool.validate();
}

TEST(rmm_pool, growth_under_a_maximum_takes_half_of_what_remains) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(1 * MiB, 4 * MiB));
  pool.allocate(1 * MiB);  // the whole initial block
  // 512 KiB: remaining = 4 - 1 = 3 MiB; grow by max(512 KiB, 1.5 MiB) = 1.5 MiB -> pool 2.5 MiB, 1 MiB left free.
  pool.allocate(512 * KiB);
  EXPECT_EQ(pool.pool_size(), 2 * MiB + 512 * KiB);
  // 1.5 MiB: the 1 MiB hole is too small; remaining 1.5 MiB -> grow by max(1.5, 0.75) = 1.5 MiB -> pool 4 MiB.
  pool.allocate(1 * MiB + 512 * KiB);
  EXPECT_EQ(pool.pool_size(), 4 * MiB);
  // 512 B comes from the 1 MiB hole.
  pool.allocate(512);
  EXPECT_EQ(pool.pool_size(), 4 * MiB);
  // 2 MiB: nothing remains below the maximum, so the device is not even asked.
  const auto before = calls(dev, device_call::legacy_malloc);
  EXPECT_EQ(pool.try_allocate(2 * MiB), 0u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), before);
  EXPECT_THROW(pool.allocate(2 * MiB), out_of_memory);
  pool.validate();
}

TEST(rmm_pool, rmm_alignment_of_256_gives_rmm_exact_sizes) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_options o = pool_of(1 * MiB);
  o.alignment = 256;
  rmm_pool_resource exact(dev, o);
  const device_ptr p = exact.allocate(100);
  EXPECT_EQ(exact.allocated_bytes(), 256u);  // RMM: align_up(100, 256)
  EXPECT_EQ(exact.allocate(100), p + 256);

  rmm_pool_resource vram_aligned(dev, pool_of(1 * MiB));
  const device_ptr q = vram_aligned.allocate(100);
  EXPECT_EQ(vram_aligned.allocated_bytes(), 512u);  // vram's 512 B promise
  EXPECT_EQ(vram_aligned.allocate(100), q + 512);
  EXPECT_EQ(q % 512, 0u);
}

TEST(rmm_pool, bad_settings_are_refused) {
  sim_device dev(small_device(64 * MiB));
  EXPECT_THROW(rmm_pool_resource(dev, pool_of(8 * MiB, 4 * MiB)), usage_error);  // initial > maximum
  EXPECT_THROW(rmm_pool_resource(dev, pool_of(1000)), usage_error);              // not a multiple of 512
  EXPECT_THROW(rmm_pool_resource(dev, pool_of(1 * MiB, 4 * MiB + 256)), usage_error);
  EXPECT_THROW(rmm_pool_resource(dev, pool_of(128 * MiB)), out_of_memory);  // more than the device has
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_THROW(make_rmm_pool_resource(dev, {{"initial_pool_sz", "1MiB"}}), usage_error);
  EXPECT_THROW(make_rmm_pool_resource(dev, {{"alignment", "1024"}}), usage_error);
  EXPECT_THROW(make_rmm_pool_resource(dev, {{"initial_pool_size", "lots"}}), usage_error);

  auto r = make_rmm_pool_resource(dev, {{"initial_pool_size", "2MiB"}, {"maximum_pool_size", "8MiB"}});
  EXPECT_EQ(r->name(), "rmm-pool");
  EXPECT_EQ(r->reserved_bytes(), 2 * MiB);
}

TEST(rmm_pool, another_streams_block_is_taken_without_waiting_on_the_host) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(1 * MiB));  // the 1 MiB block sits in stream 0's list
  dev.hold(1);

  // On stream 1: its own list is empty; stream 0's list has the block (one stream wait).
  const device_ptr p = pool.allocate(1 * MiB, 1);
  EXPECT_EQ(pool.stream_waits(), 1u);
  pool.deallocate(p, 1 * MiB, 1);  // into stream 1's list; its event is recorded on the held stream
  EXPECT_THAT(pool.free_blocks(1), ElementsAre(Pair(p, 1 * MiB)));
  EXPECT_EQ(calls(dev, device_call::event_record), 1u);

  // Stream 1 again: its own list, no wait.
  EXPECT_EQ(pool.allocate(256 * KiB, 1), p);
  EXPECT_EQ(pool.stream_waits(), 1u);
  pool.deallocate(p, 256 * KiB, 1);

  // Stream 2: nothing of its own; stream 0's list is empty; stream 1's block is taken at once although stream 1
  // is held: RMM makes stream 2 wait on stream 1's event on the GPU, never on the host. The rest (512 KiB)
  // stays in stream 1's list.
  EXPECT_EQ(pool.allocate(512 * KiB, 2), p);
  EXPECT_EQ(pool.stream_waits(), 2u);
  EXPECT_THAT(pool.free_blocks(1), ElementsAre(Pair(p + 512 * KiB, 512 * KiB)));
  EXPECT_EQ(calls(dev, device_call::event_query), 0u);
  EXPECT_EQ(calls(dev, device_call::event_synchronize), 0u);
  EXPECT_EQ(calls(dev, device_call::stream_synchronize), 0u);
  EXPECT_EQ(calls(dev, device_call::legacy_malloc), 1u);  // the initial pool only
  pool.validate();
}

TEST(rmm_pool, merging_other_streams_lists_joins_their_blocks) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(1 * MiB));
  const device_ptr lo = pool.allocate(512 * KiB, 1);  // from stream 0's list (wait 1)
  const device_ptr hi = pool.allocate(512 * KiB, 2);  // the rest of it (wait 2)
  ASSERT_EQ(hi, lo + 512 * KiB);
  pool.deallocate(lo, 512 * KiB, 1);
  pool.deallocate(hi, 512 * KiB, 2);
  // Two halves in two lists: neighbours, but not merged.
  EXPECT_THAT(pool.free_blocks(1), ElementsAre(Pair(lo, 512 * KiB)));
  EXPECT_THAT(pool.free_blocks(2), ElementsAre(Pair(hi, 512 * KiB)));
  EXPECT_EQ(pool.free_memory().largest, 512 * KiB);

  // 1 MiB on stream 3: no list holds 1 MiB, so stream 3 merges stream 0's (empty), 1's and 2's lists into its
  // own, in event order, a wait each: after stream 2's the halves join and serve it. The pool does not grow.
  EXPECT_EQ(pool.allocate(1 * MiB, 3), lo);
  EXPECT_EQ(pool.stream_waits(), 2u + 3u);
  EXPECT_EQ(pool.pool_size(), 1 * MiB);
  EXPECT_TRUE(pool.free_blocks(1).empty());
  EXPECT_TRUE(pool.free_blocks(2).empty());
  pool.validate();
}

TEST(rmm_pool, bad_frees_throw_and_change_nothing) {
  sim_device dev(small_device(64 * MiB));
  rmm_pool_resource pool(dev, pool_of(4 * MiB));
  const device_ptr a = pool.allocate(1000);
  const device_ptr b = pool.allocate(3000);
  pool.deallocate(b, 3000);
  const blocks free_before = pool.free_blocks();
  const auto allocated = pool.allocated_bytes();

  EXPECT_THROW(pool.deallocate(a + 512, 512), usage_error);     // inside a block
  EXPECT_THROW(pool.deallocate(0x1234000, 1000), usage_error);  // never allocated
  EXPECT_THROW(pool.deallocate(b, 3000), usage_error);          // double free
  EXPECT_THROW(pool.deallocate(a, 1024), usage_error);          // wrong size (same rounded size, still wrong)
  EXPECT_EQ(pool.free_blocks(), free_before);
  EXPECT_EQ(pool.allocated_bytes(), allocated);
  pool.validate();
  pool.deallocate(a, 1000);
  EXPECT_EQ(pool.allocated_bytes(), 0u);
}

TEST(rmm_pool, keeps_its_memory_until_destroyed) {
  sim_device dev(small_device(64 * MiB));
  {
    rmm_pool_resource pool(dev, pool_of(2 * MiB));
    const device_ptr p = pool.allocate(3 * MiB);  // grows by 3 MiB (a 4 MiB page run on the device)
    pool.deallocate(p, 3 * MiB);
    pool.release_cached();  // RMM's pool has no way to shrink
    EXPECT_EQ(pool.reserved_bytes(), 5 * MiB);
    EXPECT_EQ(dev.used_bytes(), 2 * MiB + 4 * MiB);
  }
  EXPECT_EQ(dev.used_bytes(), 0u);
  EXPECT_EQ(calls(dev, device_call::legacy_free), 2u);
}

// ---- a plain re-statement of RMM's rules (linear scans over sorted vectors), run side by side ----------

class reference_pool {
 public:
  reference_pool(device& dev, std::size_t initial, std::optional<std::size_t> maximum)
      : dev_(dev), max_(maximum) {
    auto b = expand(initial, initial);
    lists_[event_of(0)].push_back(*b);
  }

  device_ptr allocate(std::size_t bytes, stream_id s) {
    const std::size_t size = round_up(bytes, 512);
    const int ev = event_of(s);
    auto& own = lists_[ev];
    if (auto b = best(own, size)) return split(*b, size, own);
    for (auto& [e, l] : lists_) {
      if (e == ev) continue;
      if (auto b = best(l, size)) return split(*b, size, l);
    }
    for (auto it = lists_.begin(); it != lists_.end();) {
      if (it->first == ev) {
        ++it;
        continue;
      }
      for (const blk& x : it->second) insert(own, x);
      it = lists_.erase(it);
      if (auto b = best(own, size)) return split(*b, size, own);
    }
    std::size_t ask = std::max(size, pool_);
    if (max_) {
      const std::size_t remaining = round_up(*max_ > pool_ ? *max_ - pool_ : 0, 512);
      ask = size <= remaining ? std::max(size, remaining / 2) : 0;
    }
    auto b = expand(ask, size);
    if (!b) return 0;
    return split(*b, size, own);
  }

  /// As RMM's free_block: the block heads an upstream block exactly when its address starts one.
  void deallocate(device_ptr p, std::size_t bytes, stream_id s) {
    insert(lists_[event_of(s)], blk{p, round_up(bytes, 512), upstream_.contains(p)});
  }
  std::size_t pool() const { return pool_; }

 private:
  struct blk {
    device_ptr p;
    std::size_t s;
    bool head;
  };
  int event_of(stream_id s) { return events_.try_emplace(s, static_cast<int>(events_.size())).first->second; }
  std::optional<blk> expand(std::size_t ask, std::size_t min) {
    while (ask >= min && ask > 0) {
      if (device_ptr p = dev_.legacy_malloc(ask)) {
        pool_ += ask;
        upstream_.insert(p);
        return blk{p, ask, true};
      }
      if (ask == min) break;
      ask = std::max(min, ask / 2);
    }
    return std::nullopt;
  }
  static std::optional<blk> best(std::vector<blk>& l, std::size_t size) {
    std::size_t at = l.size();
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (l[i].s >= size && (at == l.size() || l[i].s < l[at].s)) at = i;
    }
    if (at == l.size()) return std::nullopt;
    blk b = l[at];
    l.erase(l.begin() + static_cast<std::ptrdiff_t>(at));
    return b;
  }
  static void insert(std::vector<blk>& l, blk b) {
    std::size_t i = 0;
    while (i < l.size() && l[i].p < b.p) ++i;
    const bool prev = i > 0 && l[i - 1].p + l[i - 1].s == b.p && !b.head;
    const bool next = i < l.size() && b.p + b.s == l[i].p && !l[i].head;
    if (prev && next) {
      l[i - 1].s += b.s + l[i].s;
      l.erase(l.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (prev) {
      l[i - 1].s += b.s;
    } else if (next) {
      l[i] = blk{b.p, b.s + l[i].s, b.head};
    } else {
      l.insert(l.begin() + static_cast<std::ptrdiff_t>(i), b);
    }
  }
  static device_ptr split(blk b, std::size_t size, std::vector<blk>& rest) {
    if (b.s > size) insert(rest, blk{b.p + size, b.s - size, false});
    return b.p;
  }

  device& dev_;
  std::optional<std::size_t> max_;
  std::size_t pool_ = 0;
  std::set<device_ptr> upstream_;
  std::map<stream_id, int> events_;
  std::map<int, std::vector<blk>> lists_;
};

class rmm_pool_vs_reference : public ::testing::TestWithParam<std::optional<std::size_t>> {};

TEST_P(rmm_pool_vs_reference, same_addresses_for_a_seeded_random_run) {
  // Two identical devices: the same legacy_malloc sequence gives the same addresses on both.
  sim_device dev(small_device(96 * MiB));
  sim_device ref_dev(small_device(96 * MiB));
  rmm_pool_resource pool(dev, pool_of(8 * MiB, GetParam()));
  reference_pool ref(ref_dev, 8 * MiB, GetParam());

  std::mt19937_64 rng(20240611);
  struct live {
    device_ptr p;
    std::size_t bytes;
  };
  std::vector<live> alive;
  int failures = 0;
  for (int step = 0; step < 5000; ++step) {
    const stream_id s = rng() % 3;
    if (alive.empty() || rng() % 100 < 55) {
      const std::size_t bytes = rng() % 10 == 0 ? 1 + rng() % (6 * MiB) : 1 + rng() % (64 * KiB);
      const device_ptr p = pool.try_allocate(bytes, s);
      const device_ptr q = ref.allocate(bytes, s);
      ASSERT_EQ(p, q) << "step " << step;
      if (p != 0) alive.push_back(live{p, bytes});
      failures += p == 0 ? 1 : 0;
    } else {
      const std::size_t i = rng() % alive.size();
      const live l = alive[i];
      alive[i] = alive.back();
      alive.pop_back();
      pool.deallocate(l.p, l.bytes, s);
      ref.deallocate(l.p, l.bytes, s);
    }
    ASSERT_EQ(pool.pool_size(), ref.pool()) << "step " << step;
    pool.validate();
  }
  // The run reached every path: growth, refusals, and blocks taken from other streams.
  EXPECT_GT(pool.upstream_block_sizes().size(), 3u);
  EXPECT_GT(failures, 0);
  EXPECT_GT(pool.stream_waits(), 0u);
}

INSTANTIATE_TEST_SUITE_P(maximum, rmm_pool_vs_reference,
                         ::testing::Values(std::optional<std::size_t>{}, std::optional<std::size_t>{64 * MiB}));

}  // namespace
}  // namespace vram
