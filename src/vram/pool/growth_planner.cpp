// Where the arena puts a block (growth_planner.hpp); arena.hpp says when each kind of candidate is wanted.
#include "vram/pool/growth_planner.hpp"

#include <algorithm>
#include <optional>
#include <tuple>
#include <vector>

namespace vram::detail {

namespace {

// The largest v <= cap with v == target (mod g), or none.
std::optional<std::size_t> congruent_below(std::size_t cap, std::size_t target, std::size_t g) {
  const std::size_t r = target % g;
  if (cap < r) return std::nullopt;
  return r + (cap - r) / g * g;
}

bool overlaps(device_ptr a, std::size_t al, device_ptr b, std::size_t bl) { return a < b + bl && b < a + al; }

}  // namespace

growth_plan plan_mapped(const handle_map& books, std::size_t s, std::size_t align, std::size_t zi, bool by_pinning) {
  const handle_map::zone& z = books.zone_at(zi);
  // Every candidate here takes mapped memory (grows false, no calls), so growth_plan::key(true) orders them by
  // (pinned, leftover, block) alone: compare those, and make the plan once, for the best.
  struct candidate {
    std::size_t pinned, leftover;
    device_ptr block;
    auto key() const { return std::tie(pinned, leftover, block); }
  };
  std::optional<candidate> best;
  std::size_t looked = 0;
  constexpr std::size_t ranges_considered = 8;
  z.free.for_each_fit(s, [&](device_ptr start, std::size_t len) {
    const device_ptr ends[2] = {round_up(start, align), (start + len - s) / align * align};
    for (std::size_t e = 0; e < (by_pinning ? 2u : 1u); ++e) {
      const device_ptr at = ends[e];
      if (at < start || at + s > start + len) continue;
      // short of tight, the best fit whatever it pins
      const candidate c{by_pinning ? books.pinned_by(at, s) : 0, len - s, at};
      if (!best || c.key() < best->key()) best = c;
    }
    return by_pinning && best && best->pinned > 0 && ++looked < ranges_considered;
  });
  growth_plan plan;
  if (best) {
    plan.valid = true;
    plan.block = best->block;
    plan.pinned = best->pinned;
    plan.leftover = best->leftover;
  }
  return plan;
}

// Growth candidates: the least pinning among the top, the holes, and (with aliases) pieces elsewhere.
growth_plan plan_growth(const handle_map& books, const piece_index& px, std::size_t s, std::size_t align,
                        std::size_t zi, bool by_pinning, const growth_settings& settings) {
  const handle_map::zone& z = books.zone_at(zi);
  const std::size_t g = books.granularity();
  const device_ptr zb = books.zone_base(zi), ze = books.zone_end(zi);
  const std::size_t cap = settings.handle_cap;
  const bool lean = settings.level >= pressure::lean;
  const bool aliases = settings.aliasing && settings.level >= pressure::tight && s <= settings.alias_max;
  growth_plan best;
  auto offer = [&](growth_plan p) {
    if ((!p.fresh && p.block % align != 0) || (p.fresh && p.head_use % align != 0) || p.need > p.room) return;
    p.valid = true;
    p.grows = true;
    p.calls = (p.need + cap - 1) / cap + (p.split != 0) + (p.head_use > 0) + (p.tail_use > 0);
    // In-place parts may land on cold handles; alias pieces of cold handles pin them too.
    p.pinned = p.need + (p.fresh ? 0 : books.pinned_by(p.block, s));
    if (p.head_use > 0 && books.handle(p.head.handle).busy == 0) p.pinned += p.head.handle_bytes;
    if (p.tail_use > 0 && books.handle(p.tail.handle).busy == 0) p.pinned += p.tail.handle_bytes;
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
  using by_len_t = piece_index::by_length;
  auto suffix_piece = [&](const std::pair<std::size_t, device_ptr>& e) {
    const auto& v = books.view_at(e.second - 1);
    return piece{e.second - e.first, e.first, v.handle, books.handle(v.handle).bytes};
  };
  auto prefix_piece = [&](const std::pair<std::size_t, device_ptr>& e) {
    const auto& v = books.view_at(e.second);
    return piece{e.second, e.first, v.handle, books.handle(v.handle).bytes};
  };
  // The k smallest pieces of at least n bytes, and the two largest (which, in handles larger than a granule,
  // may hold more than one granule of the block).
  auto candidates = [&](const by_len_t& by_len, std::size_t n, bool suffix, std::size_t k) {
    std::vector<piece> out;
    if (!aliases) return out;
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
  if (lean) z.unmapped.for_each_fit(s > 4 * g ? s - 4 * g : g, [&](device_ptr u0, std::size_t gap) {
    if (!frontier || u0 != frontier->first) gaps.emplace_back(u0, gap);
    return gaps.size() < gaps_considered;
  });
  // When tight, also the gaps beside the four largest free ranges, however small: a range that holds most of
  // the block needs only the rest mapped beside it. Without them a large block that no range held grew in full
  // elsewhere, recycling the cold handles of the range it nearly fitted.
  constexpr std::size_t ranges_beside_considered = 4;
  if (settings.level >= pressure::tight) {
    std::size_t looked = 0;
    auto add = [&](const std::optional<std::pair<device_ptr, std::size_t>>& u) {
      if (u && std::none_of(gaps.begin(), gaps.end(), [&](const auto& q) { return q.first == u->first; }))
        gaps.push_back(*u);
    };
    z.free.for_each_largest([&](device_ptr f, std::size_t len) {
      if (len < s) {  // one that holds the block alone is plan_mapped's
        if (f + len < ze) add(z.unmapped.containing(f + len));
        if (f > zb) add(z.unmapped.containing(f - 1));
      }
      return ++looked < ranges_beside_considered;
    });
  }

  for (const auto& [u0, gap] : gaps) {
    const device_ptr u1 = u0 + gap;
    const auto [fl, a] = left_of(u0);
    const bool top = frontier && frontier->first == u0;
    const std::size_t b = top ? 0 : right_of(u1);
    if (a < s && a + gap + b >= s) {
      // Left-aligned: the block starts in the free memory before the gap.
      const std::size_t rem = s - a;
      growth_plan p;
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
        growth_plan q = p;  // aligned at the top instead, leaving the free memory before it as it is
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
        growth_plan q = p;
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
      growth_plan p;
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
        growth_plan q = p;
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
    growth_plan p;
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
  if (aliases && !px.lengths(piece_index::side::suffix).empty() && !px.lengths(piece_index::side::prefix).empty()) {
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

}  // namespace vram::detail
