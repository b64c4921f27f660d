// The lock-free-readable block table.
#include "vram/pool/block_table.hpp"

#include <thread>

namespace vram::detail {

block_table::block_table() {
  tables_.push_back(std::make_unique<table>(1024));
  current_.store(tables_.back().get(), std::memory_order_release);
}

block_table::~block_table() = default;

void block_table::insert_live(device_ptr p, std::size_t size) {
  if ((used_ + 1) * 2 > tables_.back()->mask + 1) grow();
  table* t = tables_.back().get();
  std::size_t i = hash(p) & t->mask;
  std::size_t reuse = SIZE_MAX;
  for (;; i = (i + 1) & t->mask) {
    const std::uint64_t w = t->slots[i].word.load(std::memory_order_acquire);
    if (w == 0) break;
    if ((w & ~state_mask) == p) {  // this address had a slot: reuse it
      reuse = i;
      break;
    }
    if (reuse == SIZE_MAX && (w & state_mask) == static_cast<std::uint64_t>(block_state::gone)) reuse = i;
  }
  // A tombstone of another address may be taken over: a reader looking for that address then finds nothing,
  // which is the right answer for a block that is gone.
  if (reuse == SIZE_MAX) {
    reuse = i;
    ++used_;
  }
  slot& s = t->slots[reuse];
  s.size.store(size, std::memory_order_relaxed);
  s.word.store(p | static_cast<std::uint64_t>(block_state::live), std::memory_order_release);
  ++live_;
}

std::size_t block_table::transition(device_ptr p, block_state from, block_state to, block_state* found) {
  const std::uint64_t want = p | static_cast<std::uint64_t>(from);
  for (;;) {
    table* t = current_.load(std::memory_order_acquire);
    bool retry = false;
    for (std::size_t i = hash(p) & t->mask;; i = (i + 1) & t->mask) {
      slot& s = t->slots[i];
      std::uint64_t w = s.word.load(std::memory_order_acquire);
      if (w == 0) {
        if (found) *found = block_state::empty;
        return 0;
      }
      if (w & moved_bit) {
        retry = true;  // the table is being grown: wait for the new one
        break;
      }
      if ((w & ~state_mask) != p) continue;
      if (w != want) {
        if (found) *found = static_cast<block_state>(w & state_mask);
        return 0;
      }
      const std::size_t size = s.size.load(std::memory_order_relaxed);
      if (s.word.compare_exchange_strong(w, p | static_cast<std::uint64_t>(to), std::memory_order_acq_rel)) {
        if (to == block_state::gone) --live_;  // only the lock holder marks blocks gone
        return size;
      }
      if (w & moved_bit) {
        retry = true;
        break;
      }
      if (found) *found = static_cast<block_state>(w & state_mask);
      return 0;
    }
    if (retry) {
      while (current_.load(std::memory_order_acquire) == t) std::this_thread::yield();
    }
  }
}

block_state block_table::lookup(device_ptr p, std::size_t* size) const {
  for (;;) {
    table* t = current_.load(std::memory_order_acquire);
    for (std::size_t i = hash(p) & t->mask;; i = (i + 1) & t->mask) {
      const std::uint64_t w = t->slots[i].word.load(std::memory_order_acquire);
      if (w == 0) return block_state::empty;
      if (w & moved_bit) break;
      if ((w & ~state_mask) != p) continue;
      if (size) *size = t->slots[i].size.load(std::memory_order_relaxed);
      return static_cast<block_state>(w & state_mask);
    }
    while (current_.load(std::memory_order_acquire) == t) std::this_thread::yield();
  }
}

void block_table::grow() {
  table* old = tables_.back().get();
  std::size_t n = old->mask + 1;
  while (live_ * 4 >= n) n *= 2;  // the new table starts at most a quarter full
  auto fresh = std::make_unique<table>(n);
  std::size_t used = 0;
  for (std::size_t i = 0; i <= old->mask; ++i) {
    // Freeze the slot: a racing transition fails on the moved bit and retries on the new table.
    std::uint64_t w = old->slots[i].word.load(std::memory_order_acquire);
    while (!old->slots[i].word.compare_exchange_weak(w, w | moved_bit, std::memory_order_acq_rel)) {
    }
    const auto state = static_cast<block_state>(w & state_mask);
    if (w == 0 || state == block_state::gone) continue;
    const device_ptr p = w & ~state_mask;
    std::size_t j = hash(p) & fresh->mask;
    while (fresh->slots[j].word.load(std::memory_order_relaxed) != 0) j = (j + 1) & fresh->mask;
    fresh->slots[j].size.store(old->slots[i].size.load(std::memory_order_relaxed), std::memory_order_relaxed);
    fresh->slots[j].word.store(w, std::memory_order_relaxed);
    ++used;
  }
  used_ = used;
  tables_.push_back(std::move(fresh));
  current_.store(tables_.back().get(), std::memory_order_release);
}

}  // namespace vram::detail
