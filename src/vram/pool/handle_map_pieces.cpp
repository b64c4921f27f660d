// The books' pieces (handle_map.hpp): free memory at the ends of handles beside the gaps of the zones' address
// space, kept in the piece index by boundary and by length, so growth finds the one that fits without walking
// every gap. A piece depends only on the free memory inside one view next to a gap boundary, so after a
// change only the boundaries of the views it touched are looked at again (pieces_changed), each in a granule
// lookup unless a gap is there.
#include <fmt/format.h>

#include <algorithm>

#include "vram/core/error.hpp"
#include "vram/pool/handle_map.hpp"

namespace vram::detail {

// A gap is address space the device has unmapped (the zone's unmapped set). A view gone from the books whose
// unmap waits for its fence is no gap: nothing may be mapped there yet, so no piece lies beside it.

// The free bytes that end at x, where a gap starts, within the view that ends there.
std::size_t handle_map::suffix_len(std::size_t zi, device_ptr x) const {
  if (x <= zone_base(zi) || x >= zone_end(zi) || x % granularity_ != 0) return 0;
  if (granules_[granule_of(x - 1)].view == none) return 0;
  const auto gap = zones_[zi].unmapped.containing(x);
  if (!gap || gap->first != x) return 0;
  return free_ending_at(zi, x);
}

// The free bytes that start at x, where a gap ends, within the view that starts there.
std::size_t handle_map::prefix_len(std::size_t zi, device_ptr x) const {
  if (x <= zone_base(zi) || x >= zone_end(zi) || x % granularity_ != 0) return 0;
  if (granules_[granule_of(x)].view == none) return 0;
  const auto gap = zones_[zi].unmapped.containing(x - 1);
  if (!gap || gap->first + gap->second != x) return 0;
  return free_starting_at(zi, x);
}

std::size_t handle_map::free_ending_at(std::size_t zi, device_ptr x) const {
  const auto f = zones_[zi].free.containing(x - 1);
  return f ? x - std::max(f->first, view_at(x - 1).va) : 0;
}

std::size_t handle_map::free_starting_at(std::size_t zi, device_ptr x) const {
  const auto f = zones_[zi].free.containing(x);
  return f ? std::min(f->first + f->second, x + handle_bytes_at(x)) - x : 0;
}

void handle_map::refresh_point(std::size_t zi, device_ptr x) {
  pieces_.set(piece_index::side::suffix, x, suffix_len(zi, x));
  pieces_.set(piece_index::side::prefix, x, prefix_len(zi, x));
}

// A piece lies within one view, so a change of free memory in [p, q) (which is all mapped) can change only
// the pieces at the ends of the views holding p and q - 1, and only where a gap is (no piece is anywhere
// else, and free memory changing does not move the gaps).
void handle_map::pieces_changed(device_ptr p, device_ptr q) {
  if (!pieces_kept_) return;
  const std::size_t zi = zone_index(p);
  const device_ptr zb = zone_base(zi), ze = zone_end(zi);
  auto mapped = [&](device_ptr x) { return granules_[granule_of(x)].view != none; };
  auto at_gap = [&](device_ptr x) { return x > zb && x < ze && mapped(x - 1) != mapped(x); };
  std::uint32_t last = none;
  for (const device_ptr x : {p, q - 1}) {
    const std::uint32_t v = granules_[granule_of(x)].view;
    if (v == last) continue;
    last = v;
    const device_ptr va = views_[v].va;
    const device_ptr end = va + handles_[views_[v].handle].bytes;
    if (at_gap(va)) refresh_point(zi, va);
    if (at_gap(end)) refresh_point(zi, end);
  }
}

// A view mapped or unmapped at [p, q), or gone from the books at [p, q) before the device unmaps it: the gaps,
// or the views beside them, changed there, and only there.
void handle_map::gaps_changed(device_ptr p, device_ptr q) {
  if (!pieces_kept_) return;
  const std::size_t zi = zone_index(p);
  refresh_point(zi, p);
  refresh_point(zi, q);
}

void handle_map::keep_pieces(bool keep) {
  if (keep == pieces_kept_) return;
  pieces_kept_ = keep;
  pieces_.clear();
  if (!keep) return;
  for (std::size_t zi = 0; zi < zones_.size(); ++zi) {
    for (const auto& [u0, gap] : zones_[zi].unmapped.ranges()) {
      refresh_point(zi, u0);
      refresh_point(zi, u0 + gap);
    }
  }
}

// Every handle's free ends, as pieces: the free bytes at the end and at the start of each view.
piece_index handle_map::every_piece() const {
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

void handle_map::validate_pieces() const {
  if (!pieces_kept_) {
    if (!pieces_.empty()) throw invariant_error("handle map: pieces are kept while their indexes are dropped");
    return;
  }
  pieces_.validate();
  piece_index::by_place suffixes, prefixes;
  for (std::size_t zi = 0; zi < zones_.size(); ++zi) {
    for (const auto& [u0, gap] : zones_[zi].unmapped.ranges()) {
      if (const auto n = suffix_len(zi, u0)) suffixes.emplace(u0, n);
      if (const auto n = prefix_len(zi, u0 + gap)) prefixes.emplace(u0 + gap, n);
    }
  }
  if (suffixes != pieces_.places(piece_index::side::suffix) || prefixes != pieces_.places(piece_index::side::prefix))
    throw invariant_error(fmt::format("handle map: {} suffixes and {} prefixes indexed; the gaps have {} and {}",
                                      pieces_.size(piece_index::side::suffix), pieces_.size(piece_index::side::prefix),
                                      suffixes.size(), prefixes.size()));
}

}  // namespace vram::detail
