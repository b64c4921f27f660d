// The index of pieces (piece_index.hpp).
#include "vram/pool/piece_index.hpp"

#include <fmt/format.h>

#include "vram/core/error.hpp"

namespace vram::detail {

void piece_index::set(side s, device_ptr x, std::size_t len) {
  half& h = part(s);
  const auto it = h.at.find(x);
  if (it != h.at.end()) {
    if (it->second == len) return;
    h.by_len.erase({it->second, x});
    if (len == 0) {
      h.at.erase(it);
      return;
    }
    it->second = len;
    h.by_len.insert({len, x});
    return;
  }
  if (len == 0) return;
  h.at.emplace(x, len);
  h.by_len.insert({len, x});
}

std::size_t piece_index::length_at(side s, device_ptr x) const noexcept {
  const auto& at = part(s).at;
  const auto it = at.find(x);
  return it == at.end() ? 0 : it->second;
}

void piece_index::clear() noexcept {
  suffix_ = half{};
  prefix_ = half{};
}

void piece_index::validate() const {
  for (const side s : {side::suffix, side::prefix}) {
    const half& h = part(s);
    const char* name = s == side::suffix ? "suffix" : "prefix";
    if (h.by_len.size() != h.at.size())
      throw invariant_error(fmt::format("piece index: {} {}es by place, {} by length", h.at.size(), name, h.by_len.size()));
    for (const auto& [a, n] : h.at) {
      if (n == 0) throw invariant_error(fmt::format("piece index: empty {} at {:#x}", name, a));
      if (!h.by_len.count({n, a})) throw invariant_error(fmt::format("piece index: {} at {:#x} not indexed by length", name, a));
    }
  }
}

}  // namespace vram::detail
