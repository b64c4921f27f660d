// Where the arena puts a block, and how it finds the memory under it; see arena.hpp for the policy.
//
// Every candidate is scored by the bytes of handles it *pins*: handles that no live block touched before
// and that the block will touch (cold handles it lands on, and handles mapped anew). Pinning is what turns
// free memory into memory held for the block, so the least pinning is the least memory held. Candidates:
//  - in mapped free memory: the best-fitting free ranges, the block at either end of each;
//  - growth (memory mapped for the block). A zone's address space is mapped views separated by unmapped
//    gaps. Beside a gap, the free memory that ends where the gap starts is a *suffix* of the handle mapped
//    there, and the free memory that starts where the gap ends is a *prefix* of the next handle. A block can
//      - start in the suffix (left-aligned) and run into the gap, mapping handles there; if it reaches the
//        far side, it ends in the prefix; at the top of the zone this is how an expandable segment grows;
//      - end in the prefix (right-aligned), its first bytes in a new granule mapped into the gap;
//      - use a suffix or prefix *elsewhere* (an alias): that handle is mapped once more beside the block's
//        new handles, so that its free end falls at the block's first (or last) bytes. The bytes move from the
//        old view to the new one (foreign at the old), so each byte is still reachable from one free list.
// Two orders. While the device has room for tight_budgets (3) cache budgets (the arena is roomy or lean) it
// takes the best-fitting range of mapped free memory whenever one holds the block, and grows at the top of the
// zone otherwise (a lean arena also into holes), as few driver calls as it can. Once the device (or the limit)
// leaves less than that (*tight*), memory is what will run out: the arena places by the least pinning anywhere
// (mapped ranges at either end, holes, aliases), and pays driver calls for it, so that the layout is packed
// before the device's end is met. Until less than one budget is left, though, a block that fits mapped memory takes it
// even where it pins a cold handle: growth would create memory beside the cold handle, not recycle it.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <tuple>

#include "vram/core/error.hpp"
#include "vram/device/device.hpp"
#include "vram/pool/arena.hpp"

namespace vram::detail {

struct arena::piece {
  device_ptr at = 0;    // the free bytes, at the view that owns them
  std::size_t len = 0;  // 0: no piece
  std::uint32_t handle = none;
  std::size_t handle_bytes = 0;
};

struct arena::plan {
  bool valid = false;
  bool grows = false;         // maps memory (driver calls); else a range of mapped free memory
  std::size_t pinned = 0;     // the score: bytes of handles the block makes busy
  std::size_t calls = 0;      // views it maps
  std::size_t leftover = SIZE_MAX;  // free memory left in the ranges it uses (ties: less is better)
  bool in_hole = false;
  bool fresh = false;     // in a new address range, found when carried out (block and map_at then)
  device_ptr block = 0;
  device_ptr map_at = 0;  // where the new handles go
  std::size_t need = 0;   // their bytes
  std::size_t room = 0;   // most bytes they may span from map_at (more than need stays free)
  std::size_t split = 0;  // a handle boundary wanted this far from map_at (0: none)
  piece head, tail;       // aliases: the block's first head_use bytes / last tail_use bytes
  std::size_t head_use = 0, tail_use = 0;

  auto key(bool by_pinning) const {
    return by_pinning ? std::make_tuple(pinned, std::size_t{grows}, calls, leftover, block)
                    : std::make_tuple(std::size_t{grows}, pinned, calls, leftover, block);
  }
};

namespace {

// The largest v <= cap with v == target (mod g), or none.
std::optional<std::size_t> congruent_below(std::size_t cap, std::size_t target, std::size_t g) {
  const std::size_t r = target % g;
  if (cap < r) return std::nullopt;
  return r + (cap - r) / g * g;
}

bool overlaps(device_ptr a, std::size_t al, device_ptr b, std::size_t bl) { return a < b + bl && b < a + al; }

}  // namespace

// Tight: the device (or the limit) no longer has room for tight_budgets cache budgets beside this block;
// full: not even for one. Lean: no room for one under the reserve bound (reserve_ratio x the peak in use), or
// tight.
void arena::judge_tightness(std::size_t s) {
  pressure_ = judge_pressure({.request = s,
                              .reserved = reserved_,
                              .in_use = in_use_,
                              .capacity = capacity(),
                              .lean_bound = lean_bound(s),
                              .max_cached_ratio = options_.max_cached_ratio,
                              .tight_budgets = options_.tight_budgets});
  constexpr std::size_t roomy_requests_before_dropping_pieces = 1024;
  if (tight()) {
    roomy_judgements_ = 0;
    if (options_.aliasing) keep_pieces(true);
  } else if (pieces_kept_ && ++roomy_judgements_ >= roomy_requests_before_dropping_pieces) {
    keep_pieces(false);
  }
}

std::size_t arena::pinned_by(device_ptr p, std::size_t size) const {
  // Cold handles under the mapped parts of [p, p + size), each counted once: only a handle with several
  // views can show twice, so only those are remembered.
  std::size_t pinned = 0;
  std::vector<std::uint32_t> seen;
  for (device_ptr at = p, end = p + size; at < end;) {
    const auto& gr = granules_[granule_of(at)];
    if (gr.view == none) {
      const auto gap = zones_[zone_index(at)].unmapped.containing(at);
      at = gap ? gap->first + gap->second : (at / granularity_ + 1) * granularity_;
      continue;
    }
    const view_rec& v = views_[gr.view];
    const auto& h = handles_[v.handle];
    if (h.busy == 0) {
      if (h.views.size() == 1) {
        pinned += h.bytes;
      } else if (std::find(seen.begin(), seen.end(), v.handle) == seen.end()) {
        pinned += h.bytes;
        seen.push_back(v.handle);
      }
    }
    at = v.va + h.bytes;
  }
  return pinned;
}

arena::plan arena::best_mapped(std::size_t s, std::size_t align, std::size_t zi) const {
  const zone& z = zones_[zi];
  plan best;
  std::size_t looked = 0;
  constexpr std::size_t ranges_considered = 8;
  const bool by_pinning = tight();  // a tight arena weighs what a block pins, at either end of a range
  z.free.for_each_fit(s, [&](device_ptr start, std::size_t len) {
    const device_ptr ends[2] = {round_up(start, align), (start + len - s) / align * align};
    for (std::size_t e = 0; e < (by_pinning ? 2u : 1u); ++e) {
      const device_ptr at = ends[e];
      if (at < start || at + s > start + len) continue;
      plan p;
      p.valid = true;
      p.block = at;
      p.pinned = by_pinning ? pinned_by(at, s) : 0;  // short of tight, the best fit whatever it pins
      p.leftover = len - s;
      if (!best.valid || p.key(true) < best.key(true)) best = p;
    }
    return by_pinning && best.pinned > 0 && ++looked < ranges_considered;
  });
  return best;
}

// Growth candidates: the least pinning among the top, the holes, and (with aliases) pieces elsewhere.
arena::plan arena::best_growth(std::size_t s, std::size_t align, std::size_t zi, bool by_pinning,
                               const piece_index* pieces) const {
  const piece_index& px = pieces != nullptr ? *pieces : pieces_;
  const zone& z = zones_[zi];
  const std::size_t g = granularity_;
  const device_ptr zb = zone_base(zi), ze = zone_end(zi);
  const std::size_t cap = handle_cap();
  plan best;
  auto offer = [&](plan p) {
    if ((!p.fresh && p.block % align != 0) || (p.fresh && p.head_use % align != 0) || p.need > p.room) return;
    p.valid = true;
    p.grows = true;
    p.calls = (p.need + cap - 1) / cap + (p.split != 0) + (p.head_use > 0) + (p.tail_use > 0);
    // In-place parts may land on cold handles; alias pieces of cold handles pin them too.
    p.pinned = p.need + (p.fresh ? 0 : pinned_by(p.block, s));
    if (p.head_use > 0 && handles_[p.head.handle].busy == 0) p.pinned += p.head.handle_bytes;
    if (p.tail_use > 0 && handles_[p.tail.handle].busy == 0) p.pinned += p.tail.handle_bytes;
    if (!best.valid || p.key(by_pinning) < best.key(by_pinning)) best = p;
  };
  // The free range ending at a gap's start, and the one starting at its end (lengths 0 when none).
  auto left_of = [&](device_ptr u0) -> std::pair<device_ptr, std::size_t> {
    if (u0 == zb) return {u0, 0};
    const auto f = z.free.containing(u0 - 1);
    return f ? std::pair{f->first, f->second} : std::pair{u0, std::size_t{0}};
  };
  auto right_of = [&](device_ptr u1) -> std::size_t {
    if (u1 == ze) return 0;
    const auto f = z.free.containing(u1);
    return f ? f->second : 0;
  };
  const auto frontier = z.unmapped.containing(ze - 1);

  // Pieces for aliases, chosen by best fit: what is left of a piece is lost to blocks that span granules
  // (it lies between a live block and foreign memory), so the piece that fits most tightly is the one to use.
  using by_len_t = std::set<std::pair<std::size_t, device_ptr>>;
  auto suffix_piece = [&](const std::pair<std::size_t, device_ptr>& e) {
    const view_rec& v = view_at(e.second - 1);
    return piece{e.second - e.first, e.first, v.handle, handles_[v.handle].bytes};
  };
  auto prefix_piece = [&](const std::pair<std::size_t, device_ptr>& e) {
    const view_rec& v = view_at(e.second);
    return piece{e.second, e.first, v.handle, handles_[v.handle].bytes};
  };
  // The k smallest pieces of at least n bytes, and the two largest (which, in handles larger than a granule,
  // may hold more than one granule of the block).
  auto candidates = [&](const by_len_t& by_len, std::size_t n, bool suffix, std::size_t k) {
    std::vector<piece> out;
    if (!options_.aliasing || !tight()) return out;
    for (auto it = by_len.lower_bound({n, 0}); it != by_len.end() && out.size() < k; ++it)
      out.push_back(suffix ? suffix_piece(*it) : prefix_piece(*it));
    std::size_t big = 0;
    for (auto it = by_len.rbegin(); it != by_len.rend() && big < 2; ++it, ++big) {
      if (it->first < n) break;
      const piece pc = suffix ? suffix_piece(*it) : prefix_piece(*it);
      if (std::none_of(out.begin(), out.end(), [&](const piece& q) { return q.at == pc.at; })) out.push_back(pc);
    }
    return out;
  };
  constexpr std::size_t fits_considered = 4;

  // Gaps to grow into: the top, and those the block nearly fills (the best-fitting first).
  std::vector<std::pair<device_ptr, std::size_t>> gaps;
  if (frontier) gaps.push_back(*frontier);
  constexpr std::size_t gaps_considered = 32;
  if (lean()) z.unmapped.for_each_fit(s > 4 * g ? s - 4 * g : g, [&](device_ptr u0, std::size_t gap) {
    if (!frontier || u0 != frontier->first) gaps.emplace_back(u0, gap);
    return gaps.size() < gaps_considered;
  });

  for (const auto& [u0, gap] : gaps) {
    const device_ptr u1 = u0 + gap;
    const auto [fl, a] = left_of(u0);
    const bool top = frontier && frontier->first == u0;
    const std::size_t b = top ? 0 : right_of(u1);
    if (a < s && a + gap + b >= s) {
      // Left-aligned: the block starts in the free memory before the gap.
      const std::size_t rem = s - a;
      plan p;
      p.block = fl;
      p.map_at = u0;
      p.in_hole = !top;
      p.leftover = top ? SIZE_MAX / 2 : a + gap + b - s;
      p.room = gap;
      if (rem <= gap) {
        p.need = round_up(rem, g);  // its partial last granule in the same handles: fewer calls
      } else {
        p.need = gap;  // and it ends in the free memory after the gap
      }
      offer(p);
      if (top && fl % align != 0) {
        plan q = p;  // aligned at the top instead, leaving the free memory before it as it is
        q.block = u0;
        q.need = round_up(s, g);
        q.split = 0;
        offer(q);
      }
      // ... with its last bytes in a prefix elsewhere.
      for (const piece& t : candidates(px.lengths(piece_index::side::prefix), std::max<std::size_t>(rem % g, 1), false, fits_considered)) {
        if (rem > gap || overlaps(t.at, t.len, fl, a + gap + 1)) continue;
        const auto e = congruent_below(std::min(t.len, rem), rem, g);
        if (!e || *e == 0 || rem - *e + t.handle_bytes > gap) continue;
        plan q = p;
        q.need = q.room = rem - *e;
        q.split = 0;
        q.tail = t;
        q.tail_use = *e;
        q.leftover = t.len - *e + (top ? SIZE_MAX / 4 : gap - q.need - t.handle_bytes);
        offer(q);
      }
    }
    if (!top && b > 0 && b < s && s - b <= gap) {
      // Right-aligned: the block ends in the free memory after the gap.
      const std::size_t rem = s - b;
      plan p;
      p.need = p.room = round_up(rem, g);
      p.map_at = u1 - p.need;
      p.block = u1 + b - s;
      p.split = rem % g == 0 ? 0 : g;  // the partial first granule in a handle of its own
      p.leftover = a + gap + b - s;
      p.in_hole = true;
      offer(p);
      // ... with its first bytes in a suffix elsewhere.
      for (const piece& h : candidates(px.lengths(piece_index::side::suffix), std::max<std::size_t>(rem % g, 1), true, fits_considered)) {
        if (overlaps(h.at, h.len, u0 - 1, gap + b + 1)) continue;
        const auto e = congruent_below(std::min(h.len, rem), rem, g);
        if (!e || *e == 0 || rem - *e + h.handle_bytes > gap) continue;
        plan q = p;
        q.need = q.room = rem - *e;
        q.map_at = u1 - q.need;
        q.split = 0;
        q.head = h;
        q.head_use = *e;
        q.leftover = h.len - *e + gap - q.need - h.handle_bytes;
        offer(q);
      }
    }
  }
  // A fresh range of address space: the block at its start (the fallback when the top has no room), or with
  // aliases at either end or both.
  auto fresh = [&](const piece* h, std::size_t hu, const piece* t, std::size_t tu) {
    const std::size_t need = round_up(s - hu - tu, g);
    if (t != nullptr && need != s - hu - tu) return;  // a tail alias ends the block: the rest is whole granules
    plan p;
    p.fresh = true;  // the address range is found when the plan is carried out
    p.need = p.room = need;
    const std::size_t whole = (s - hu - tu) / g * g;
    p.split = tu == 0 && whole > 0 && whole < need ? whole : 0;
    if (hu > 0) {
      p.head = *h;
      p.head_use = hu;
    }
    if (tu > 0) {
      p.tail = *t;
      p.tail_use = tu;
    }
    p.leftover = (h ? h->len - hu : 0) + (t ? t->len - tu : 0) + SIZE_MAX / 8;
    offer(p);
  };
  if (!best.valid) fresh(nullptr, 0, nullptr, 0);
  const std::size_t r = s % g;
  // One piece: the block's last bytes (the rest whole granules), or its first bytes (the rest new granules).
  for (const piece& t : candidates(px.lengths(piece_index::side::prefix), std::max<std::size_t>(r, 1), false, fits_considered))
    if (const auto e = congruent_below(std::min(t.len, s), s, g); e && *e > 0) fresh(nullptr, 0, &t, *e);
  for (const piece& h : candidates(px.lengths(piece_index::side::suffix), std::max<std::size_t>(r, 1), true, fits_considered))
    fresh(&h, std::min(h.len, s - 512), nullptr, 0);
  // Two pieces holding v bytes together, v = s (mod granule): the pair with the least left over, that is the
  // least bytes in all, for v = r (the residue split in two) and v = r + k granules (k fewer to map), as far
  // as the largest pieces reach (pieces of handles larger than a granule may hold more than one).
  if (options_.aliasing && tight() && !px.lengths(piece_index::side::suffix).empty() && !px.lengths(piece_index::side::prefix).empty()) {
    const std::size_t most_prefix = px.lengths(piece_index::side::prefix).rbegin()->first;
    const std::size_t reach = std::min(s, px.lengths(piece_index::side::suffix).rbegin()->first + most_prefix);
    for (std::size_t v = r; v <= reach; v += g) {
      if (v == 0) continue;
      std::size_t tried = 0;
      constexpr std::size_t pairs_considered = 16;
      for (auto it = px.lengths(piece_index::side::suffix).lower_bound({v > most_prefix ? v - most_prefix : 512, 0});
           it != px.lengths(piece_index::side::suffix).end() && tried < pairs_considered; ++it, ++tried) {
        const piece h = suffix_piece(*it);
        if (h.len >= v) break;  // the head alone holds it: the single-piece plans cover that
        for (auto jt = px.lengths(piece_index::side::prefix).lower_bound({v - h.len, 0}); jt != px.lengths(piece_index::side::prefix).end(); ++jt) {
          const piece t = prefix_piece(*jt);
          if (t.handle == h.handle) continue;
          fresh(&h, h.len, &t, v - h.len);
          break;
        }
      }
    }
  }
  return best;
}

// Every handle's free ends, as pieces: the free bytes at the end and at the start of each view (by length
// only, which is all best_growth reads).
piece_index arena::every_piece() const {
  piece_index x;
  for (const auto& h : handles_) {
    for (const std::uint32_t v : h.views) {
      const device_ptr va = views_[v].va, end = va + h.bytes;
      const std::size_t zi = zone_index(va);
      if (const std::size_t n = free_ending_at(zi, end)) x.set(piece_index::side::suffix, end, n);
      if (const std::size_t n = free_starting_at(zi, va)) x.set(piece_index::side::prefix, va, n);
    }
  }
  return x;
}

device_ptr arena::allocate_mapped(std::size_t size, std::size_t align, std::size_t zi) {
  judge_tightness(size);
  const plan p = best_mapped(size, align, zi);
  // A tight arena may rather grow than pin cold memory; allocate() decides that, with every candidate.
  if (!p.valid || (p.pinned > 0 && tight())) return 0;
  take(p, size);
  return p.block;
}

device_ptr arena::allocate(std::size_t size, std::size_t align, std::size_t zi) {
  if (!deferred_.empty()) settle_unmaps(false);  // address ranges whose fences have completed become gaps
  judge_tightness(size);
  const bool gen = tight();
  if (tight() && !idle_views_.empty()) dissolve_idle_views();
  const plan m = best_mapped(size, align, zi);
  // Until the device is full, mapped memory that holds the block is taken even where it pins a cold handle:
  // growth there would create memory beside the cold handle rather than recycle it.
  if (m.valid && (m.pinned == 0 || !gen || !full())) {
    take(m, size);
    return m.block;
  }
  ++counters_.growths;
  pace_.note(device_->now_ns(), size);
  device_ptr block = 0;
  const plan grown = best_growth(size, align, zi, gen);
  bool refused = false;
  if (m.valid && (!grown.valid || !(grown.key(gen) < m.key(gen)))) {
    take(m, size);  // mapped memory wins after all
    block = m.block;
  } else if (grown.valid) {
    block = carry_out(grown, size, zi, false, gen, refused);
    // The device refused: mapped memory that holds the block, if any is left. The growth may have recycled
    // cold handles under the range found before, so it is looked for again.
    const plan still = block == 0 && refused && m.valid ? best_mapped(size, align, zi) : plan{};
    if (still.valid) {
      take(still, size);
      block = still.block;
    } else if (block == 0 && refused) {
      // Refused: recycle every cold handle into a spare, and plan again with the memory that frees.
      ++counters_.out_of_memory_recoveries;
      drop_stale_cold();
      while (!reclaimable_.empty()) unmap_handle(reclaimable_.begin()->second);
      settle_unmaps(true);  // out-of-memory recovery may wait: released memory returns once unmapped
      plan again = best_growth(size, align, zi, true);
      refused = false;
      if (again.valid) block = carry_out(again, size, zi, true, true, refused);
      if (block == 0 && options_.aliasing && tight()) {
        // The last try before failing: the free ends of every handle, not only those beside gaps, as aliases.
        const piece_index every = every_piece();
        const plan last = best_growth(size, align, zi, true, &every);
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
      while (!spare_.empty()) {
        const auto idx = spare_.begin()->second;
        take_spare(idx);
        release_spare(idx);
      }
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

void arena::note_growth(const plan& p, device_ptr block, std::size_t size) {
  counters_.hole_growths += p.in_hole;
  counters_.lean_growths += pressure_ == pressure::lean;
  counters_.burst_growths += pace_.bursting();
  counters_.aliased_growths += p.head_use > 0 || p.tail_use > 0;
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  touch(block, size);
}

void arena::take(const plan& p, std::size_t size) {
  free_erase(p.block, size);
  in_use_ += size;
  peak_in_use_ = std::max(peak_in_use_, in_use_);
  touch(p.block, size);
}

bool arena::protects(const plan& p, std::size_t size, std::uint32_t idx) const {
  for (const auto v : handles_[idx].views) {
    const device_ptr va = views_[v].va;
    const std::size_t hb = handles_[idx].bytes;
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
void arena::reclaim(std::size_t want, std::size_t room, const plan& p, std::size_t size, bool gen) {
  const double budget = (1.0 + options_.max_cached_ratio) * static_cast<double>(in_use_ + size);
  drop_stale_cold();
  std::size_t got = 0;
  std::vector<std::uint32_t> recycled;  // spares made here, for this growth: never given back below
  auto pick = [&](auto first, auto last) -> std::uint32_t {
    for (auto it = first; it != last; ++it)
      if (!protects(p, size, it->second)) return it->second;
    return none;
  };
  while (got < want && !reclaimable_.empty()) {
    const std::size_t rest = want - got;
    std::uint32_t idx = none;
    if (!gen) {
      // The smallest that covers the rest and has room, else the largest below it.
      for (auto it = reclaimable_.lower_bound({rest, 0}); it != reclaimable_.end() && it->first <= room - got; ++it)
        if (!protects(p, size, it->second)) {
          idx = it->second;
          break;
        }
    }
    if (idx == none) {
      // The largest at most the rest.
      auto end = reclaimable_.upper_bound({rest, none});
      for (auto it = end; it != reclaimable_.begin() && idx == none;) {
        --it;
        if (!protects(p, size, it->second)) idx = it->second;
      }
    }
    if (idx == none && gen && static_cast<double>(reserved_ + rest) > budget) {
      // Only larger ones are left: give a spare larger than the rest back to the device (not one recycled
      // here: it fitted what was wanted, and the growth maps it), else the smallest larger cold handle.
      auto sp = spare_.upper_bound(rest);
      while (sp != spare_.end() && std::find(recycled.begin(), recycled.end(), sp->second) != recycled.end()) ++sp;
      if (sp != spare_.end()) {
        const auto s_idx = sp->second;
        take_spare(s_idx);
        release_spare(s_idx);
        continue;
      }
      idx = pick(reclaimable_.lower_bound({rest, 0}), reclaimable_.end());
      if (idx == none) break;
      unmap_handle(idx);
      take_spare(idx);
      release_spare(idx);
      continue;
    }
    if (idx == none) break;
    got += handles_[idx].bytes;
    unmap_handle(idx);
    recycled.push_back(idx);
  }
}

bool arena::acquire(const plan& p, std::size_t size, bool recovering, bool gen, std::vector<std::uint32_t>& use,
                    std::size_t& have) {
  // Spares first: they cost no creation. The smallest that covers the rest (if it has room), else the largest
  // that does not; a tight arena takes only spares that fit in what is still wanted, as reclaim() does.
  auto from_spares = [&] {
    while (have < p.need && !spare_.empty()) {
      const std::size_t rest = p.need - have;
      auto it = spare_.lower_bound(rest);
      if (it != spare_.end() && gen && it->first > rest) it = spare_.end();
      if (it == spare_.end() || it->first > p.room - have) {
        it = spare_.upper_bound(rest);
        if (it == spare_.begin()) return;
        --it;
        if (it->first > rest) return;
      }
      have += it->first;
      use.push_back(it->second);
      spare_bytes_ -= it->first;
      spare_.erase(it);
    }
  };
  from_spares();
  const double budget = (1.0 + options_.max_cached_ratio) * static_cast<double>(in_use_ + size);
  if (have < p.need && static_cast<double>(reserved_ + (p.need - have)) > budget) {
    reclaim(p.need - have, p.room - have, p, size, gen);
    from_spares();
  }
  bool released = false;
  while (have < p.need) {
    std::size_t want = p.need - have;
    if (p.split > have && p.split < p.need) want = p.split - have;
    want = std::min(want, handle_cap());
    const auto idx = create_handle(want);
    if (idx != none) {
      have += handles_[idx].bytes;
      use.push_back(idx);
      continue;
    }
    // Refused. When recovering, the spares this growth cannot use go back to the device, and creation is tried
    // once more.
    if (!recovering || released || spare_.empty()) return false;
    released = true;
    while (!spare_.empty()) {
      const auto s = spare_.begin()->second;
      take_spare(s);
      release_spare(s);
    }
  }
  return true;
}

device_ptr arena::carry_out(const plan& planned, std::size_t size, std::size_t zi, bool recovering, bool gen,
                            bool& refused) {
  zone& z = zones_[zi];
  plan p = planned;
  if (p.fresh) {
    const std::size_t hb = p.head_use > 0 ? p.head.handle_bytes : 0, tb = p.tail_use > 0 ? p.tail.handle_bytes : 0;
    const auto va = z.unmapped.find_best_fit(hb + p.need + tb, granularity_);
    if (!va) return 0;  // no address range left: not a refusal
    p.map_at = *va + hb;
    p.block = p.map_at - p.head_use;
  }
  std::vector<std::uint32_t> use;
  std::size_t have = 0;
  if (!acquire(p, size, recovering, gen, use, have)) {
    for (auto s : use) {
      spare_.emplace(handles_[s].bytes, s);
      spare_bytes_ += handles_[s].bytes;
    }
    refused = true;
    return 0;
  }
  device_ptr at = p.map_at;
  for (auto s : use) {
    map_view(s, at);
    free_insert(at, handles_[s].bytes);
    at += handles_[s].bytes;
  }
  // An alias: the piece's bytes leave the view that owned them and belong to a new view at va.
  auto alias = [&](const piece& src, device_ptr from, std::size_t len, device_ptr va) {
    const device_ptr src_view = view_at(src.at).va;
    free_erase(from, len);
    zone_of(src.at).foreign.insert(from, len);
    map_view(src.handle, va);
    const device_ptr own = va + (from - src_view);
    z.foreign.insert(va, own - va);
    free_insert(own, len);
    z.foreign.insert(own + len, va + src.handle_bytes - own - len);
  };
  if (p.head_use > 0) alias(p.head, p.head.at + p.head.len - p.head_use, p.head_use, p.map_at - p.head.handle_bytes);
  if (p.tail_use > 0) alias(p.tail, p.tail.at, p.tail_use, p.map_at + have);
  free_erase(p.block, size);
  return p.block;
}

}  // namespace vram::detail
