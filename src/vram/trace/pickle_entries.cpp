// A trace entry read whole by the pickle machine (pickle_machine.hpp): the fast path of a snapshot.
#include "vram/trace/pickle_machine.hpp"

namespace vram::detail {

bool pickle_machine::try_entry() {
  if constexpr (std::endian::native != std::endian::little) return false;
  constexpr std::size_t lookahead = 4096;  // more than any entry without new frames
  if (buf_.size() - pos_ < lookahead && !eof_) refill(lookahead);
  const auto* const b = reinterpret_cast<const unsigned char*>(buf_.data());
  entry_scan c{b + pos_, b + buf_.size(), memo_.size(), entry_scan::npos};
  overwritten_.clear();
  entry_kv_.clear();
  if (scan_entry(c)) {
    pickle_tree::record rec;
    std::optional<ref> dropped;
    if (as_record(entry_kv_.data(), entry_kv_.size(), rec, dropped)) {
      tree_.records_.push_back(rec);
      const ref r = make(kind::record, tree_.records_.size() - 1);
      if (c.dict_memo != entry_scan::npos) memo_[c.dict_memo] = r;
      push(r);
      pos_ = static_cast<std::size_t>(c.p - b);
      return true;
    }
  }
  for (auto it = overwritten_.rbegin(); it != overwritten_.rend(); ++it) memo_[it->first] = it->second;
  memo_.shrink_to(c.memo_start);
  return false;
}

inline bool pickle_machine::scan_memo(entry_scan& c, ref r, std::uint64_t* index_out) {
  if (c.p >= c.end) return true;
  std::uint64_t index;
  if (*c.p == 0x94) {
    ++c.p;
    index = memo_.size();
  } else if (*c.p == 'q' || *c.p == 'r') {
    const bool one = *c.p++ == 'q';
    if (!(one ? scan_le<1>(c, index) : scan_le<4>(c, index))) return false;
    if (index > memo_.size()) return false;  // the map's
  } else {
    return true;
  }
  if (index >= limits_.max_memo) return false;  // memo_put's error
  if (index_out != nullptr) *index_out = index;
  if (index == memo_.size()) {
    memo_.push_back(r);
  } else {
    overwritten_.emplace_back(index, memo_[index]);
    memo_[index] = r;
  }
  return true;
}

template <std::size_t N>
inline bool pickle_machine::scan_fetch(entry_scan& c, ref& r) {
  std::uint64_t index;
  if (!scan_le<N>(c, index) || index >= memo_.size() || index == c.dict_memo) return false;
  r = memo_[index];
  return true;
}

template <std::size_t N>
inline bool pickle_machine::scan_text(entry_scan& c, ref& r) {
  std::uint64_t len;
  if (!scan_le<N>(c, len) || len > limits_.max_string_bytes || static_cast<std::uint64_t>(c.end - c.p) < len)
    return false;
  r = make(kind::string, intern(std::string_view(reinterpret_cast<const char*>(c.p), len)));
  c.p += len;
  return scan_memo(c, r);
}

bool pickle_machine::scan_entry(entry_scan& c) {
  if (!scan_memo(c, make(kind::none), &c.dict_memo)) return false;  // None holds the index until the record
  if (!skip(c, '(') || marks_.size() + 2 > limits_.max_depth) return false;
  for (;;) {
    if (c.p >= c.end) return false;
    if (skip(c, 'u')) return true;
    ref key, value;
    if (!scan_value(c, key)) return false;
    if (skip(c, ']')) {  // the dropped list: None in the memo at once, as compact() leaves it there (forget)
      if (tree_.kind_of(key) != kind::string || role_of(pickle_tree::payload(key)) != role_dropped) return false;
      value = make(kind::none);
      if (!scan_memo(c, value) || !scan_dropped_items(c)) return false;
    } else if (!scan_value(c, value)) {
      return false;
    }
    entry_kv_.push_back(key);
    entry_kv_.push_back(value);
  }
}

inline bool pickle_machine::scan_value(entry_scan& c, ref& r) {
  if (c.p >= c.end) return false;
  std::uint64_t v;
  switch (*c.p++) {
    case 'K': if (!scan_le<1>(c, v)) return false; r = make_integer(static_cast<std::int64_t>(v)); return true;
    case 'M': if (!scan_le<2>(c, v)) return false; r = make_integer(static_cast<std::int64_t>(v)); return true;
    case 'J':
      if (!scan_le<4>(c, v)) return false;
      r = make_integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(v)));
      return true;
    case 0x8a: {  // LONG1 of at most 8 bytes: a 64-bit int, two's complement
      if (c.p >= c.end) return false;
      const std::size_t n = *c.p++;
      if (n > 8 || static_cast<std::size_t>(c.end - c.p) < n) return false;
      v = 0;
      for (std::size_t i = n; i-- > 0;) v = (v << 8) | c.p[i];
      c.p += n;
      if (n > 0 && n < 8 && (v >> (8 * n - 1)) != 0) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
      r = make_integer(static_cast<std::int64_t>(v));
      return true;
    }
    case 'N': r = make(kind::none); return true;
    case 0x88: r = make(kind::boolean, 1); return true;
    case 0x89: r = make(kind::boolean, 0); return true;
    case 'h': return scan_fetch<1>(c, r);
    case 'j': return scan_fetch<4>(c, r);
    case 0x8c: return scan_text<1>(c, r);
    case 'X': return scan_text<4>(c, r);
    default: return false;
  }
}

bool pickle_machine::scan_dropped_items(entry_scan& c) {
  if (c.p >= c.end) return true;
  if (skip(c, '(')) {
    for (;;) {
      if (c.p >= c.end) return false;
      if (skip(c, 'e')) return true;
      if (!scan_dropped_item(c, 2)) return false;  // inside the entry's MARK and the list's
    }
  }
  const unsigned char* const at = c.p;
  if (*c.p == '}') return scan_dropped_item(c, 1) && skip(c, 'a');  // inside the entry's MARK
  if (*c.p != 'h' && *c.p != 'j') return true;
  ref item;
  if (scan_value(c, item) && skip(c, 'a')) return true;
  c.p = at;  // the next key: the list stays empty
  return true;
}

bool pickle_machine::scan_dropped_item(entry_scan& c, std::size_t marks_open) {
  if (c.p >= c.end) return false;
  if (*c.p != '}') {
    ref item;
    return (*c.p == 'h' || *c.p == 'j') && scan_value(c, item);
  }
  ++c.p;
  if (!scan_memo(c, make(kind::none)) || c.p >= c.end) return false;
  if (!skip(c, '(')) return *c.p == '}' || *c.p == 'e' || *c.p == 'a';  // empty, and the list goes on
  if (marks_.size() + marks_open + 1 > limits_.max_depth) return false;  // the MARK one at a time refuses
  for (;;) {
    if (c.p >= c.end) return false;
    if (skip(c, 'u')) return true;
    ref key, value;
    if (!scan_value(c, key) || !scan_value(c, value)) return false;
    // A dict with the tag's key could be a record, which compact() would make and keep in the memo.
    if (tree_.kind_of(key) == kind::string && role_of(pickle_tree::payload(key)) == role_tag) return false;
  }
}

}  // namespace vram::detail
