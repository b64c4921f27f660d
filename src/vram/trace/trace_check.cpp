// check_trace: one pass over the trace with a map from address to "live" or "freed" and the size of the
// address's latest alloc. Design decisions:
//  - a free at an address whose latest alloc is live frees it; at an address that was allocated and freed
//    since, it is a double free; at an address never allocated, it is unmatched (and stays so: a second free
//    there is unmatched again);
//  - an alloc at a live address counts as a duplicate and leaves the address live (one later free clears it);
//  - a free of a live block with a size other than its alloc's frees it, and is counted: an allocator would
//    refuse it (vram's pool does), and a replay frees the block with its allocated size;
//  - a flat open-addressing table (linear probing, power-of-two size, addresses never removed) keeps the
//    pass at a few nanoseconds an event with one allocation up front.

#include "vram/trace/trace_check.hpp"

#include <fmt/format.h>

#include <vector>

#include "vram/core/error.hpp"

namespace vram {

namespace detail {

// Address -> state and size, for the addresses a trace touches. Grows by doubling at half full.
class address_states {
 public:
  enum class state : std::uint8_t { empty, live, freed, never_allocated };
  struct slot {
    std::uint64_t addr = 0;
    std::uint64_t size = 0;  // of the latest alloc
    state st = state::empty;
  };

  explicit address_states(std::size_t expected) {
    std::size_t cap = 64;
    while (cap < expected * 2) cap <<= 1;
    slots_.resize(cap);
  }

  /// @brief The slot of @p addr, made (empty) if new; valid until the next call.
  slot& at(std::uint64_t addr) {
    if ((used_ + 1) * 2 > slots_.size()) grow();
    slot& s = find(slots_, addr);
    if (s.st == state::empty) {
      s.addr = addr;
      ++used_;
    }
    return s;
  }

  /// @brief Checks the table is at most half full, its size a power of two, and used_ counts its slots.
  /// @throws invariant_error.
  void validate() const {
    if (slots_.empty() || (slots_.size() & (slots_.size() - 1)) != 0)
      throw invariant_error(fmt::format("address_states: {} slots is not a power of two", slots_.size()));
    if (used_ * 2 > slots_.size())
      throw invariant_error(fmt::format("address_states: {} used of {} slots, more than half", used_, slots_.size()));
    std::size_t filled = 0;
    for (const slot& s : slots_) filled += s.st != state::empty;
    if (filled != used_)
      throw invariant_error(fmt::format("address_states: {} filled slots, {} counted", filled, used_));
  }

  std::uint64_t count(state st) const noexcept {
    std::uint64_t n = 0;
    for (const slot& s : slots_) n += s.st == st;
    return n;
  }

 private:
  static slot& find(std::vector<slot>& slots, std::uint64_t addr) noexcept {
    const std::size_t mask = slots.size() - 1;
    const std::uint64_t h = addr * 0x9E3779B97F4A7C15ull;
    std::size_t i = static_cast<std::size_t>(h ^ (h >> 29)) & mask;
    while (slots[i].st != state::empty && slots[i].addr != addr) i = (i + 1) & mask;
    return slots[i];
  }

  void grow() {
    std::vector<slot> bigger(slots_.size() * 2);
    for (const slot& s : slots_)
      if (s.st != state::empty) find(bigger, s.addr) = s;
    slots_.swap(bigger);
  }

  std::vector<slot> slots_;
  std::size_t used_ = 0;
};

}  // namespace detail

trace_check check_trace(const trace& t) {
  using state = detail::address_states::state;
  trace_check r;
  detail::address_states states(t.events.size() / 2 + 1);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.action == trace_action::alloc) {
      auto& slot = states.at(e.addr);
      if (slot.st == state::live) {
        ++r.duplicate_allocs;
        if (!r.first_duplicate_alloc) r.first_duplicate_alloc = i;
      }
      slot.st = state::live;
      slot.size = e.size;
    } else if (e.action == trace_action::free_requested) {
      auto& slot = states.at(e.addr);
      if (slot.st == state::live) {
        slot.st = state::freed;
        if (e.size != slot.size) {
          ++r.wrong_size_frees;
          if (!r.first_wrong_size_free) r.first_wrong_size_free = i;
        }
      } else if (slot.st == state::freed) {
        ++r.double_frees;
        if (!r.first_double_free) r.first_double_free = i;
      } else {
        ++r.unmatched_frees;
        if (!r.first_unmatched_free) r.first_unmatched_free = i;
        slot.st = state::never_allocated;  // a second free here is unmatched too, not a double free
      }
    }
  }
#if VRAM_DEBUG_VALIDATE
  states.validate();
#endif
  r.live_at_end = states.count(state::live);
  return r;
}

}  // namespace vram
