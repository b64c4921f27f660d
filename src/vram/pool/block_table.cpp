// The lock-free-readable block table.
#include "vram/pool/block_table.hpp"

namespace vram::detail {

block_table::block_table() : owned_(std::make_unique<table>(1024)) {
  current_.store(owned_.get(), std::memory_order_release);
}

block_table::~block_table() = default;

void block_table::insert_live(device_ptr p, std::size_t size) {
  table* t = owned_.get();
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

bool block_table::free_live(device_ptr p, std::size_t size, block_state& found, std::size_t& held,
                            slot*& where) noexcept {
  slot* s = find(p);
  if (s == nullptr) {
    found = block_state::empty;
    held = 0;
    return false;
  }
  const std::uint64_t w = s->word.load(std::memory_order_acquire);
  held = static_cast<std::size_t>(s->size.load(std::memory_order_relaxed));
  found = static_cast<block_state>(w & state_mask);
  if (found != block_state::live || held != size) return false;
  s->word.store(p | static_cast<std::uint64_t>(block_state::cached), std::memory_order_release);
  where = s;
  return true;
}

std::size_t block_table::transition(device_ptr p, block_state from, block_state to) noexcept {
  slot* s = find(p);
  if (s == nullptr || s->word.load(std::memory_order_acquire) != (p | static_cast<std::uint64_t>(from))) return 0;
  const std::size_t size = static_cast<std::size_t>(s->size.load(std::memory_order_relaxed));
  s->word.store(p | static_cast<std::uint64_t>(to), std::memory_order_release);
  if (to == block_state::gone) --live_;  // only the lock holder marks blocks gone
  return size;
}

block_state block_table::lookup(device_ptr p, std::size_t* size) const noexcept {
  const slot* s = find(p);
  if (s == nullptr) return block_state::empty;
  if (size) *size = static_cast<std::size_t>(s->size.load(std::memory_order_relaxed));
  return static_cast<block_state>(s->word.load(std::memory_order_acquire) & state_mask);
}

void block_table::grow() {
  const table* old = owned_.get();
  std::size_t n = old->mask + 1;
  while (live_ * 4 >= n) n *= 2;  // the new table starts at most a quarter full
  auto fresh = std::make_unique<table>(n);
  std::size_t used = 0;
  for (std::size_t i = 0; i <= old->mask; ++i) {
    const std::uint64_t w = old->slots[i].word.load(std::memory_order_relaxed);
    if (w == 0 || static_cast<block_state>(w & state_mask) == block_state::gone) continue;
    std::size_t j = hash(w & ~state_mask) & fresh->mask;
    while (fresh->slots[j].word.load(std::memory_order_relaxed) != 0) j = (j + 1) & fresh->mask;
    fresh->slots[j].size.store(old->slots[i].size.load(std::memory_order_relaxed), std::memory_order_relaxed);
    fresh->slots[j].word.store(w, std::memory_order_relaxed);
    ++used;
  }
  used_ = used;
  owned_ = std::move(fresh);
  current_.store(owned_.get(), std::memory_order_release);
}

}  // namespace vram::detail
