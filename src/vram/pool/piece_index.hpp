#pragma once
// The index of pieces: free memory at the ends of handles beside the gaps of the arena's address space
// (arena.hpp). A *suffix* is the free memory that ends where a gap starts, a *prefix* the free memory that
// starts where a gap ends; each is keyed by that gap boundary. The index answers two questions: what lies at
// a boundary (to keep it current as memory changes) and which pieces are at least n bytes long, smallest
// first (to find the one that fits a block's partial granule). What a piece is, and when it changes, is the
// books' to say (handle_map_pieces.cpp); this type keeps the two orders in step.

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "vram/core/types.hpp"

namespace vram::detail {

class piece_index {
 public:
  enum class side : std::uint8_t { suffix, prefix };
  /// (bytes, boundary), shortest first; ties by address.
  using by_length = std::set<std::pair<std::size_t, device_ptr>>;
  using by_place = std::map<device_ptr, std::size_t>;

  /// @brief The piece on @p s at boundary @p at is @p len bytes long; 0 removes it.
  void set(side s, device_ptr at, std::size_t len);
  /// @brief Bytes of the piece on @p s at @p at; 0 when there is none.
  std::size_t length_at(side s, device_ptr at) const noexcept;
  const by_length& lengths(side s) const noexcept { return part(s).by_len; }
  const by_place& places(side s) const noexcept { return part(s).at; }
  /// @brief The number of pieces on @p s.
  std::size_t size(side s) const noexcept { return part(s).at.size(); }
  bool empty() const noexcept { return suffix_.at.empty() && prefix_.at.empty(); }
  void clear() noexcept;
  /// @brief Checks that both orders hold the same pieces; throws invariant_error if not.
  void validate() const;

 private:
  struct half {
    by_place at;
    by_length by_len;
  };
  half& part(side s) noexcept { return s == side::suffix ? suffix_ : prefix_; }
  const half& part(side s) const noexcept { return s == side::suffix ? suffix_ : prefix_; }
  half suffix_, prefix_;
};

}  // namespace vram::detail
