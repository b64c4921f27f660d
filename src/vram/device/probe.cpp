// Probing a device over the seam, and reading a pool snapshot's free ranges (see probe.hpp).
// Decisions:
//  - Searches work in units of the step, so every size tried is a multiple of the granularity and the
//    answers are exact to it; the first try is the upper bound itself, so an unfragmented device answers
//    in one try (a real GPU's driver maps scattered pages into one range, so that is the common case).
//  - Every block a try or the total takes is freed before the function returns, also when a call throws.
#include "vram/device/probe.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram {

namespace {

/// @brief Frees the blocks it holds when it goes out of scope.
class held_blocks {
 public:
  explicit held_blocks(device& dev) : dev_(dev) {}
  held_blocks(const held_blocks&) = delete;
  held_blocks& operator=(const held_blocks&) = delete;
  ~held_blocks() {
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) {
      try {
        dev_.legacy_free(*it);
      } catch (...) {  // a destructor must not throw; the device already said what failed
      }
    }
  }
  void hold(device_ptr p) { blocks_.push_back(p); }

 private:
  device& dev_;
  std::vector<device_ptr> blocks_;
};

/// @brief One try: legacy_malloc(bytes), freed at once. True when it was granted.
bool fits(device& dev, std::size_t bytes, unsigned& tries) {
  ++tries;
  const device_ptr p = dev.legacy_malloc(bytes);
  if (p == 0) return false;
  dev.legacy_free(p);
  return true;
}

std::size_t as_size(const nlohmann::json& v, const char* what, std::size_t i) {
  if (v.is_number_unsigned()) return v.get<std::size_t>();
  if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return static_cast<std::size_t>(v.get<std::int64_t>());
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    try {
      std::size_t end = 0;
      const auto n = std::stoull(s, &end, 0);  // decimal, or hex with 0x
      if (end == s.size()) return n;
    } catch (const std::exception&) {
    }
  }
  throw input_error(fmt::format("snapshot: free_ranges[{}]: the {} is not a non-negative number: {}", i, what, v.dump()));
}

}  // namespace

double fragmentation(std::size_t largest, std::size_t free) noexcept {
  if (free == 0) return 0.0;
  return 1.0 - static_cast<double>(largest) / static_cast<double>(free);
}

block_search find_largest_block(device& dev, std::size_t upper, std::size_t step) {
  block_search s;
  std::size_t hi = upper / step;  // in steps
  if (hi == 0) return s;
  if (fits(dev, hi * step, s.tries)) {
    s.bytes = hi * step;
    return s;
  }
  // Down from the top by 1, 2, 4, ... steps until a size fits (0 always does): the answer usually lies just
  // under the free memory, and this finds it in about 2 log2(distance from the top) tries.
  std::size_t lo = 0;
  for (std::size_t d = 1; d < hi; d *= 2) {
    if (fits(dev, (hi - d) * step, s.tries)) {
      lo = hi - d;
      break;
    }
    hi -= d;
  }
  // Invariant: lo steps fit (0 trivially), hi steps do not.
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (fits(dev, mid * step, s.tries)) lo = mid;
    else hi = mid;
  }
  s.bytes = lo * step;
  return s;
}

block_search find_block_by_halving(device& dev, std::size_t total, std::size_t step) {
  block_search s;
  for (std::size_t bytes = total / 2; bytes >= step && bytes > 0; bytes /= 2) {
    if (fits(dev, bytes, s.tries)) {
      s.bytes = bytes;
      return s;
    }
  }
  return s;
}

probe_result probe(device& dev, const probe_options& options) {
  probe_result r;
  r.before = dev.mem_info();
  r.step = options.step != 0 ? options.step : dev.granularity();
  r.largest = find_largest_block(dev, r.before.free, r.step);
  r.halving = find_block_by_halving(dev, r.before.total, r.step);
  r.fragmentation = fragmentation(r.largest.bytes, r.before.free);
  if (!options.allocatable) return r;

  held_blocks taken(dev);
  std::size_t bound = r.largest.bytes;  // no later block can be larger than an earlier one
  while (bound > 0) {
    if (r.blocks == options.max_blocks) {
      r.capped = true;
      break;
    }
    const std::size_t free_now = dev.mem_info().free;
    const block_search s = find_largest_block(dev, std::min(bound, free_now), r.step);
    r.allocatable_tries += s.tries;
    if (s.bytes == 0) break;
    ++r.allocatable_tries;
    const device_ptr p = dev.legacy_malloc(s.bytes);
    if (p == 0) break;  // granted a moment ago, refused now: something else allocates; stop here
    taken.hold(p);
    r.allocatable += s.bytes;
    ++r.blocks;
    bound = s.bytes;
  }
  return r;
}

free_ranges_summary summarize_snapshot(const nlohmann::json& snapshot) {
  if (!snapshot.is_object()) throw input_error("snapshot: not a JSON object");
  const auto it = snapshot.find("free_ranges");
  if (it == snapshot.end() || !it->is_array()) throw input_error("snapshot: no \"free_ranges\" array");
  free_ranges_summary s;
  std::vector<std::pair<std::size_t, std::size_t>> seen;  // [address, end), to find ranges that overlap
  for (std::size_t i = 0; i < it->size(); ++i) {
    const auto& range = (*it)[i];
    if (!range.is_array() || range.size() != 2) {
      throw input_error(fmt::format("snapshot: free_ranges[{}] is not [address, bytes]: {}", i, range.dump()));
    }
    const std::size_t address = as_size(range[0], "address", i);
    const std::size_t bytes = as_size(range[1], "size", i);
    if (bytes == 0) throw input_error(fmt::format("snapshot: free_ranges[{}] has 0 bytes", i));
    if (bytes > std::numeric_limits<std::size_t>::max() - address) {
      throw input_error(fmt::format("snapshot: free_ranges[{}] runs past the end of the address space: {}", i,
                                    range.dump()));
    }
    seen.emplace_back(address, address + bytes);
    ++s.ranges;
    s.free_bytes += bytes;
    s.largest = std::max(s.largest, bytes);
  }
  // Ranges that do not overlap, each inside the address space, cannot sum past it.
  std::sort(seen.begin(), seen.end());
  for (std::size_t i = 1; i < seen.size(); ++i) {
    if (seen[i].first < seen[i - 1].second) {
      throw input_error(fmt::format("snapshot: free ranges overlap: [{:#x}, {:#x}) and [{:#x}, {:#x})", seen[i - 1].first,
                                    seen[i - 1].second, seen[i].first, seen[i].second));
    }
  }
  s.fragmentation = fragmentation(s.largest, s.free_bytes);
  if (auto r = snapshot.find("reserved_bytes"); r != snapshot.end() && r->is_number_unsigned()) {
    s.reserved_bytes = r->get<std::size_t>();
  }
  if (auto p = snapshot.find("policy"); p != snapshot.end() && p->is_string()) s.policy = p->get<std::string>();
  if (auto d = snapshot.find("device"); d != snapshot.end() && d->is_string()) s.device = d->get<std::string>();
  return s;
}

free_ranges_summary read_snapshot_file(const std::string& path) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) throw input_error(path + ": cannot open: it is a folder");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw input_error(path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw input_error(path + ": not JSON: " + e.what());
  }
  try {
    return summarize_snapshot(j);
  } catch (const input_error& e) {
    throw input_error(path + ": " + e.what());
  }
}

}  // namespace vram
