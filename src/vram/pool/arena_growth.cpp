// How the arena grows: judging its pressure, choosing between the plans of growth_planner.hpp, and carrying
// the chosen one out with the device (spares first, then cold handles recycled, then new ones); see arena.hpp
// for the policy.
#include "vram/pool/arena.hpp"

#include <algorithm>
#include <cstdint>

#include "vram/device/device.hpp"

namespace vram::detail {

// A block of more than large_alias_granules takes free ends of handles elsewhere (aliases) only near the end
// of memory: when what is in use, the block and large_alias_budgets cache budgets reach the capacity. Before
// that, the bytes an alias saves (under two granules) are little beside the block, and placing large blocks
// in fresh ranges with aliases at their ends, built of cold handles recycled one granule at a time, scattered
// the layout until every large request grew again: a serving loop held to 1.05x its peak live made 8,344 maps
// in 17.9 s of its trace with them, 1,475 without (docs/pool.md, "views and aliases").
growth_settings arena::settings(std::size_t s) const noexcept {
  constexpr std::size_t large_alias_granules = 32;
  constexpr double large_alias_budgets = 2.0;
  std::size_t alias_max = large_alias_granules * map_.granularity();
  const double in_use = static_cast<double>(in_use_ + s);
  if (in_use * (1.0 + large_alias_budgets * stage_ratio()) >= static_cast<double>(capacity()))
    alias_max = SIZE_MAX;
  // Below the peak in use, growth serves a layout the working set has cut up, not a larger working set: it may
  // fill a hole between mapped ranges, as a lean arena does, rather than extend the top past what was reserved.
  // (cnn_train: after its peak live, a 24.5 MiB block that no free piece held grew the top by 24 MiB.)
  pressure level = pressure_;
  if (options_.holes_below_peak && level < pressure::lean && in_use_ + s <= peak_in_use_) level = pressure::lean;
  return {handle_cap(s), level, options_.aliasing, alias_max};
}

// The pressure for a request of s bytes (pressure.hpp), and the piece index kept from the first tight request
// until 1024 judgements in a row (a request that grows is judged twice) find the arena short of tight.
void arena::update_pressure(std::size_t s) {
  pressure_ = judge_pressure({.request = s,
                              .reserved = map_.reserved(),
                              .in_use = in_use_,
                              .capacity = capacity(),
                              .lean_bound = lean_bound(s),
                              .max_cached_ratio = stage_ratio(),
                              .tight_budgets = options_.tight_budgets});
  constexpr std::size_t roomy_requests_before_dropping_pieces = 1024;
  if (tight()) {
    roomy_judgements_ = 0;
    if (options_.aliasing) map_.keep_pieces(true);
  } else if (map_.pieces_kept() && ++roomy_judgements_ >= roomy_requests_before_dropping_pieces) {
    map_.keep_pieces(false);
  }
}

// Stages scale with the room the device leaves. A serving loop held to 1.05x its peak live by a limit was
// tight on most requests under the full budget (5% of what is in use, three of them): its blocks went where
// they pinned the least cold memory rather than to their best fit, the layout never settled, and large
// blocks grew on every request (examples/traces/serving.vram.gz repeated to 23,000 requests under
// vram:limit=1983023616, --device sim:lag=5ms: 53,304 maps, 1,525 with the bound). Near the end of a device
// that barely holds the peak (`vram fit`), the stages come later, and pinning still packs the layout there.
double arena::stage_ratio() const noexcept {
  if (options_.stage_room_share <= 0 || peak_in_use_ == 0) return options_.max_cached_ratio;
  const double room = static_cast<double>(capacity()) / static_cast<double>(peak_in_use_) - 1.0;
  return std::min(options_.max_cached_ratio, std::max(0.0, options_.stage_room_share * room));
}

bool arena::past_budget(std::size_t s, std::size_t more) const noexcept {
  return static_cast<double>(map_.reserved() + more) >
         (1.0 + options_.max_cached_ratio) * static_cast<double>(in_use_ + s);
}

bool arena::guards_cold(std::size_t s) const noexcept {
  return tight() &&
         static_cast<double>(in_use_ + s) >= options_.cold_guard_share * static_cast<double>(peak_in_use_);
}

device_ptr arena::allocate_mapped(std::size_t size, std::size_t align, std::size_t zi) {
  update_pressure(size);
  const growth_plan p = plan_mapped(map_, size, align, zi, tight());
  // A tight arena may rather grow than pin cold memory; allocate() decides that, with every candidate.
  if (!p.valid || (p.pinned > 0 && guards_cold(size))) return 0;
  take(p, size);
  return p.block;
}

device_ptr arena::allocate(std::size_t size, std::size_t align, std::size_t zi) {
  if (!deferred_.empty()) settle_unmaps(false);  // address ranges whose fences have completed become gaps
  update_pressure(size);
  const bool gen = tight();
  if (tight() && !map_.idle_views().empty())
    counters_.views_dissolved += map_.dissolve_idle_views([this](handle_map::mapping m) { unmapped(m); });
  const growth_plan m = plan_mapped(map_, size, align, zi, tight());
  // Until the device is full, mapped memory that holds the block is taken even where it pins a cold handle:
  // growth there would create memory beside the cold handle rather than recycle it. Full, it is taken too
  // for a request well below the peak in use (guards_cold): recycling cold handles around every such request
  // of a serving loop held to 1.05x its peak live made 56,956 maps in 3,000 requests, 8,530 without
  // (docs/torch-bench.md: examples/traces/serving.vram.gz at limit=1983023616, --device sim:lag=5ms).
  if (m.valid && (m.pinned == 0 || !full() || !guards_cold(size))) {
    take(m, size);
    return m.block;
  }
  ++counters_.growths;
  pace_.note(device_->now_ns(), size);
  device_ptr block = 0;
  const growth_plan grown = plan_growth(map_, map_.pieces(), size, align, zi, gen, settings(size));
  bool refused = false;
  if (m.valid && (!grown.valid || !(grown.key(gen) < m.key(gen)))) {
    take(m, size);  // mapped memory wins after all
    block = m.block;
  } else if (grown.valid) {
    block = carry_out(grown, size, zi, false, gen, refused);
    // The device refused: mapped memory that holds the block, if any is left. The growth may have recycled
    // cold handles under the range found before, so it is looked for again.
    const growth_plan still = block == 0 && refused && m.valid ? plan_mapped(map_, size, align, zi, tight()) : growth_plan{};
    if (still.valid) {
      take(still, size);
      block = still.block;
    } else if (block == 0 && refused) {
      // Refused: recycle every cold handle into a spare, and plan again with the memory that frees.
      ++counters_.out_of_memory_recoveries;
      recycle_every_cold_handle();
      settle_unmaps(true);  // out-of-memory recovery may wait: released memory returns once unmapped
      growth_settings recovering = settings(size);
      recovering.alias_max = SIZE_MAX;  // not failing is what counts now
      growth_plan again = plan_growth(map_, map_.pieces(), size, align, zi, true, recovering);
      refused = false;
      if (again.valid) block = carry_out(again, size, zi, true, true, refused);
      if (block == 0 && options_.aliasing && tight()) {
        // The last try before failing: the free ends of every handle, not only those beside gaps, as aliases.
        const growth_plan last = plan_growth(map_, map_.every_piece(), size, align, zi, true, recovering);
        if (last.valid) {
          refused = false;
          block = carry_out(last, size, zi, true, true, refused);
          if (block != 0) {
            again = last;
            ++counters_.last_resort_growths;
          }
        }
      }
      if (block != 0) note_growth(again, block, size);
      else if (!refused) ++counters_.address_space_exhausted;
      // The device is full: handles this growth did not use go back to it.
      release_every_spare();
    } else if (block != 0) {
      note_growth(grown, block, size);
    } else {
      ++counters_.address_space_exhausted;
    }
  } else {
    ++counters_.address_space_exhausted;
  }
  return block;
}

void arena::note_growth(const growth_plan& p, device_ptr block, std::size_t size) {
  counters_.hole_growths += p.in_hole;
  counters_.lean_growths += pressure_ == pressure::lean;
  counters_.burst_growths += pace_.bursting();
  counters_.aliased_growths += p.head_use > 0 || p.tail_use > 0;
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  map_.touch(block, size);
}

void arena::take(const growth_plan& p, std::size_t size) {
  map_.free_erase(p.block, size);
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  map_.touch(p.block, size);
}

bool arena::protects(const growth_plan& p, std::size_t size, std::uint32_t idx) const {
  for (const auto v : map_.handle(idx).views) {
    const device_ptr va = map_.view(v).va;
    const std::size_t hb = map_.handle(idx).bytes;
    auto meets = [&](device_ptr a, std::size_t l) { return l > 0 && va < a + l && a < va + hb; };
    if (meets(p.block, size) || meets(p.head.at, p.head.len) || meets(p.tail.at, p.tail.len)) return true;
  }
  return false;
}

// Recycling under the cache budget: unmap cold handles into spares, never one under the plan's own memory.
// Short of tight, the arena takes the smallest that covers the rest (else the largest ones), whatever it
// leaves over; a tight one (or one recovering from a refusal) only handles that fit in what is still wanted
// (stitching), and releases larger ones
// rather than map them whole under a smaller block, so the growth can create handles of the right size.
void arena::reclaim(std::size_t want, std::size_t room, const growth_plan& p, std::size_t size, bool gen) {
  map_.drop_stale_cold();
  const auto& cold = map_.cold();
  const auto& spares = map_.spares();
  std::size_t got = 0;
  std::vector<std::uint32_t> recycled;  // spares made here, for this growth: never given back below
  auto pick = [&](auto first, auto last) -> std::uint32_t {
    for (auto it = first; it != last; ++it)
      if (!protects(p, size, it->second)) return it->second;
    return handle_map::none;
  };
  while (got < want && !cold.empty()) {
    const std::size_t rest = want - got;
    std::uint32_t idx = handle_map::none;
    if (!gen) {
      // The smallest that covers the rest and has room, else the largest below it.
      for (auto it = cold.lower_bound({rest, 0}); it != cold.end() && it->first <= room - got; ++it)
        if (!protects(p, size, it->second)) {
          idx = it->second;
          break;
        }
    }
    if (idx == handle_map::none) {
      // The largest at most the rest.
      auto end = cold.upper_bound({rest, handle_map::none});
      for (auto it = end; it != cold.begin() && idx == handle_map::none;) {
        --it;
        if (!protects(p, size, it->second)) idx = it->second;
      }
    }
    if (idx == handle_map::none && gen && past_budget(size, rest)) {
      // Only larger ones are left: give a spare larger than the rest back to the device (not one recycled
      // here: it fitted what was wanted, and the growth maps it), else the smallest larger cold handle.
      auto sp = spares.upper_bound({rest, handle_map::spare_last});
      while (sp != spares.end() && std::find(recycled.begin(), recycled.end(), sp->second) != recycled.end()) ++sp;
      if (sp != spares.end()) {
        const auto s_idx = sp->second;
        map_.take_spare(s_idx);
        release_spare(s_idx);
        continue;
      }
      idx = pick(cold.lower_bound({rest, 0}), cold.end());
      if (idx == handle_map::none) break;
      unmap_handle(idx);
      map_.take_spare(idx);
      release_spare(idx);
      continue;
    }
    if (idx == handle_map::none) break;
    got += map_.handle(idx).bytes;
    unmap_handle(idx);
    recycled.push_back(idx);
  }
}

bool arena::acquire(const growth_plan& p, std::size_t size, bool recovering, bool gen, std::vector<std::uint32_t>& use,
                    std::size_t& have) {
  // Spares first: they cost no creation. The smallest that covers the rest (if it has room), else the largest
  // that does not; a tight arena takes only spares that fit in what is still wanted, as reclaim() does. Past
  // the cache budget, a spare that would leave more than spare_slack_bytes of itself free where it is mapped
  // goes back to the device instead: the growth makes what it wants, and reserved memory falls by the rest
  // (a cold handle recycled from one zone for a small growth in another left its surplus free there).
  const auto& spares = map_.spares();
  auto from_spares = [&] {
    while (have < p.need && !spares.empty()) {
      const std::size_t rest = p.need - have;
      auto it = spares.lower_bound({rest, 0});
      if (it != spares.end() && gen && it->first.first > rest) it = spares.end();
      if (it == spares.end() || it->first.first > p.room - have) {
        it = spares.upper_bound({rest, handle_map::spare_last});
        if (it == spares.begin()) return;
        --it;
        if (it->first.first > rest) return;
      }
      const std::size_t bytes = it->first.first;
      const std::uint32_t idx = it->second;
      map_.take_spare(idx);
      if (bytes > rest && bytes - rest > options_.spare_slack_bytes && past_budget(size, rest)) {
        release_spare(idx);
        continue;
      }
      have += bytes;
      use.push_back(idx);
    }
  };
  from_spares();
  if (have < p.need && past_budget(size, p.need - have)) {
    reclaim(p.need - have, p.room - have, p, size, gen);
    from_spares();
  }
  bool released = false;
  while (have < p.need) {
    std::size_t want = p.need - have;
    if (p.split > have && p.split < p.need) want = p.split - have;
    want = std::min(want, handle_cap(size));
    const auto idx = create_handle(want);
    if (idx != handle_map::none) {
      have += map_.handle(idx).bytes;
      use.push_back(idx);
      continue;
    }
    // Refused. When recovering, the spares this growth cannot use go back to the device, and creation is tried
    // once more.
    if (!recovering || released || spares.empty()) return false;
    released = true;
    release_every_spare();
  }
  return true;
}

device_ptr arena::carry_out(const growth_plan& planned, std::size_t size, std::size_t zi, bool recovering, bool gen,
                            bool& refused) {
  growth_plan p = planned;
  if (p.fresh) {
    const std::size_t hb = p.head_use > 0 ? p.head.handle_bytes : 0, tb = p.tail_use > 0 ? p.tail.handle_bytes : 0;
    const auto va = map_.zone_at(zi).unmapped.find_best_fit(hb + p.need + tb, map_.granularity());
    if (!va) return 0;  // no address range left: not a refusal
    p.map_at = *va + hb;
    p.block = p.map_at - p.head_use;
  }
  std::vector<std::uint32_t> use;
  std::size_t have = 0;
  if (!acquire(p, size, recovering, gen, use, have)) {
    for (auto s : use) map_.add_spare(s);
    refused = true;
    return 0;
  }
  device_ptr at = p.map_at;
  for (auto s : use) {
    map_view(s, at);
    map_.free_insert(at, map_.handle(s).bytes);
    at += map_.handle(s).bytes;
  }
  // An alias: the piece's bytes leave the view that owned them and belong to a new view at va.
  auto alias = [&](const piece& src, device_ptr from, std::size_t len, device_ptr va) {
    const device_ptr src_view = map_.view_at(src.at).va;
    map_.free_erase(from, len);
    map_.foreign_insert(from, len);
    map_view(src.handle, va);
    const device_ptr own = va + (from - src_view);
    map_.foreign_insert(va, own - va);
    map_.free_insert(own, len);
    map_.foreign_insert(own + len, va + src.handle_bytes - own - len);
  };
  if (p.head_use > 0) alias(p.head, p.head.at + p.head.len - p.head_use, p.head_use, p.map_at - p.head.handle_bytes);
  if (p.tail_use > 0) alias(p.tail, p.tail.at, p.tail_use, p.map_at + have);
  map_.free_erase(p.block, size);
  return p.block;
}

}  // namespace vram::detail

