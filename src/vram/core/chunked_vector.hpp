#pragma once
// A vector that grows by chunks of 2^Bits elements and never moves what it holds: growing costs no copy, and
// never holds the old and the new array at once, as std::vector does while it doubles (for the pickle reader
// of a 2 GB snapshot, whose memo and records reach hundreds of MB, that moment was its peak of memory).
// Chunks of 1,024 elements by default (48 KB of the pickle reader's records): small enough that a small
// input costs little, large enough that a million elements are a thousand allocations. A chunk is allocated
// uninitialised; references stay valid until their elements are dropped.

#include <cstddef>
#include <memory>
#include <vector>

namespace vram::detail {

template <class T, unsigned Bits = 10>
class chunked_vector {
 public:
  static constexpr std::size_t chunk_size = std::size_t{1} << Bits;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }

  T& operator[](std::size_t i) noexcept { return chunks_[i >> Bits][i & (chunk_size - 1)]; }
  const T& operator[](std::size_t i) const noexcept { return chunks_[i >> Bits][i & (chunk_size - 1)]; }
  T& back() noexcept { return (*this)[size_ - 1]; }

  void push_back(const T& v) {
    if ((size_ >> Bits) == chunks_.size()) chunks_.push_back(std::make_unique_for_overwrite<T[]>(chunk_size));
    (*this)[size_++] = v;
  }

  /// @brief Keeps the first @p n elements (n <= size()); the chunks made stay, for what is pushed next.
  void shrink_to(std::size_t n) noexcept { size_ = n; }

  void clear() noexcept {
    chunks_.clear();
    size_ = 0;
  }

 private:
  std::vector<std::unique_ptr<T[]>> chunks_;
  std::size_t size_ = 0;
};

}  // namespace vram::detail
