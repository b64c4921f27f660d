#include "vram/report/memory_map.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace vram {

memory_state capture_state(std::span<const device_region> regions,
                           std::vector<std::pair<device_ptr, std::size_t>> blocks, memory_info info) {
  memory_state s;
  s.device_free = info.free;
  s.device_total = info.total;
  for (const device_region& r : regions) {
    const bool joins = !s.strips.empty() && r.what == device_region::kind::mapping &&
                       s.strips.back().what == device_region::kind::mapping &&
                       s.strips.back().va + s.strips.back().bytes == r.va;
    if (joins) {
      s.strips.back().bytes += r.bytes;
      ++s.strips.back().regions;
    } else {
      s.strips.push_back(map_strip{r.va, r.bytes, r.what, 1, {}});
    }
    s.held_bytes += r.bytes;
  }
  std::sort(blocks.begin(), blocks.end());
  for (map_strip& strip : s.strips) {
    const device_ptr lo = strip.va, hi = strip.va + strip.bytes;
    // The first block that ends after lo: blocks do not overlap, so starts and ends ascend together.
    auto it = std::lower_bound(blocks.begin(), blocks.end(), lo,
                               [](const std::pair<device_ptr, std::size_t>& b, device_ptr v) { return b.first + b.second <= v; });
    for (; it != blocks.end() && it->first < hi; ++it) {
      if (it->second == 0) continue;
      const std::size_t b = std::max(it->first, lo) - lo;
      const std::size_t e = std::min(it->first + it->second, hi) - lo;
      if (!strip.live.empty() && strip.live.back().second >= b)
        strip.live.back().second = std::max(strip.live.back().second, e);
      else
        strip.live.emplace_back(b, e);
    }
    std::size_t at = 0;
    const auto hole = [&](std::size_t len) {
      if (len == 0) return;
      ++s.free_pieces;
      s.largest_free = std::max(s.largest_free, len);
    };
    for (const auto& [b, e] : strip.live) {
      hole(b - at);
      s.live_bytes += e - b;
      at = e;
    }
    hole(strip.bytes - at);
  }
  return s;
}

std::string encode_cells(const map_strip& strip, std::size_t unit) {
  std::string out;
  int digit = -1;
  std::size_t run = 0;
  const auto flush = [&] {
    if (run == 0) return;
    if (!out.empty()) out += ' ';
    out += static_cast<char>('0' + digit);
    if (run > 1) out += fmt::format("*{}", run);
  };
  auto live = strip.live.begin();
  for (std::size_t lo = 0; lo < strip.bytes; lo += unit) {
    const std::size_t hi = std::min(lo + unit, strip.bytes);
    std::size_t in = 0;
    while (live != strip.live.end() && live->second <= lo) ++live;
    for (auto it = live; it != strip.live.end() && it->first < hi; ++it)
      in += std::min(it->second, hi) - std::max(it->first, lo);
    const std::size_t len = hi - lo;
    int d = static_cast<int>((in * 8 + len / 2) / len);
    if (in > 0) d = std::max(d, 1);
    if (in < len) d = std::min(d, 7);
    if (d == digit) {
      ++run;
    } else {
      flush();
      digit = d;
      run = 1;
    }
  }
  flush();
  return out;
}

std::size_t cell_unit(std::size_t bytes, std::size_t cells) {
  std::size_t unit = 512;
  while (cells > 0 && (bytes + unit - 1) / unit > cells) unit *= 2;
  return unit;
}

}  // namespace vram
