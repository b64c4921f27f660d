// The pickle machine, one opcode at a time (pickle_machine.hpp), and the tree's own functions.
#include "vram/trace/pickle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>
#include <type_traits>

#include "vram/core/error.hpp"
#include "vram/core/slots.hpp"
#include "vram/trace/pickle_machine.hpp"

namespace vram::detail {

namespace {

constexpr std::size_t chunk_bytes = 1u << 20;

// The opcodes a pickle of Python objects other than plain data uses, and the older text forms: refused.
std::string_view refused_name(unsigned char op) noexcept {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    default: return {};
  }
}

std::string_view unused_name(unsigned char op) noexcept {
  switch (op) {
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'g': return "GET";
    case 'p': return "PUT";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return {};
  }
}

}  // namespace

void pickle_machine::run() {
  for (;;) {
    op_offset_ = offset();
    const unsigned char op = u8();
    if (op == '.') {
      stop();
      return;
    }
    step(op);
    // Protocol 4 memoizes nearly every string and container at once, with MEMOIZE: taken here, the
    // opcode costs a well-predicted branch rather than a turn of the dispatch above.
    if (pos_ < buf_.size() && static_cast<unsigned char>(buf_[pos_]) == 0x94) {
      op_offset_ = offset();
      ++pos_;
      memo_put(memo_.size());
    }
  }
}

bool pickle_machine::refill(std::size_t need) {
  if (pos_ > 0) {
    buf_.erase(0, pos_);
    base_ += pos_;
    pos_ = 0;
  }
  while (buf_.size() < need && !eof_) {
    const std::size_t old = buf_.size();
    // Reads start small and double up to 1 MiB: a small pickle costs a small buffer.
    const std::size_t want = read_size_;
    read_size_ = std::min(read_size_ * 2, chunk_bytes);
    buf_.resize(old + want);
    const std::size_t got = read_(buf_.data() + old, want);
    buf_.resize(old + got);
    if (got == 0) eof_ = true;
  }
  return buf_.size() >= need;
}

pickle_machine::ref pickle_machine::make_container(kind k) {
  // A free slot is that of a dict made a record, or of dropped frames.
  const std::uint64_t slot = take_slot(tree_.containers_, free_containers_);
  tree_.containers_[slot] = pickle_tree::container{};
  tree_.containers_[slot].born = tree_.items_.size();
  return make(k, slot);
}

void pickle_machine::append(ref r, const ref* first, const ref* last) {
  auto& c = tree_.containers_[pickle_tree::payload(r)];
  auto& items = tree_.items_;
  const auto n = static_cast<std::size_t>(last - first);
  if (n == 0) return;
  if (c.size + n > std::numeric_limits<std::uint32_t>::max()) fail("a container of more than 2^32 items");
  if (c.size + n > c.capacity) {
    const std::size_t want = c.capacity == 0 ? n : std::max<std::size_t>(c.size + n, std::size_t{c.capacity} * 2);
    const std::size_t capacity = std::min<std::size_t>(want, std::numeric_limits<std::uint32_t>::max());
    if (c.offset + c.capacity == items.size() && c.capacity > 0) {
      items.resize(c.offset + capacity);
    } else {
      const std::size_t offset = items.size();
      items.resize(offset + capacity);
      std::copy_n(items.begin() + static_cast<std::ptrdiff_t>(c.offset), c.size,
                  items.begin() + static_cast<std::ptrdiff_t>(offset));
      c.offset = offset;
    }
    c.capacity = static_cast<std::uint32_t>(capacity);
  }
  std::copy(first, last, items.begin() + static_cast<std::ptrdiff_t>(c.offset + c.size));
  c.size += static_cast<std::uint32_t>(n);
}

pickle_machine::ref pickle_machine::make_text(kind k, std::size_t n) {
  if (n > limits_.max_string_bytes)
    fail(fmt::format("a string of {} bytes, more than the {} any snapshot holds", n, limits_.max_string_bytes));
  return make(k, intern(take(n)));
}

std::uint64_t pickle_machine::intern(std::string_view s) {
  recent_string* slot = nullptr;
  if (!s.empty() && s.size() <= 16) {
    slot = &recent_[(s.size() * 31u + static_cast<unsigned char>(s[0])) % recent_.size()];
    if (slot->id != none_interned && tree_.strings_[slot->id] == s) return slot->id;
  }
  auto it = tree_.interned_.find(s);
  if (it == tree_.interned_.end()) {
    tree_.strings_.emplace_back(s);
    it = tree_.interned_.emplace(tree_.strings_.back(), tree_.strings_.size() - 1).first;
  }
  if (slot != nullptr) slot->id = it->second;
  return it->second;
}

std::size_t pickle_machine::pop_mark() {
  if (marks_.empty()) fail("the opcode needs a MARK and there is none");
  const std::size_t m = marks_.back();
  marks_.pop_back();
  return m;
}

void pickle_machine::collect(kind k, bool onto_below, std::string_view op) {
  const std::size_t m = pop_mark();
  const std::size_t n = stack_.size() - m;
  if (k == kind::dict && n % 2 != 0) fail(fmt::format("{} with an odd number of values (a key without its value)", op));
  ref target;
  if (onto_below) {
    if (m == 0 || (!marks_.empty() && marks_.back() >= m)) fail(fmt::format("{} has no {} under its MARK", op, pickle_tree::name(k)));
    target = stack_[m - 1];
    expect_kind(target, k, op);
    if (k == kind::dict && records_ != nullptr && tree_.containers_[pickle_tree::payload(target)].size == 0 &&
        compact(target, m))
      return;
  } else {
    target = make_container(k);
  }
  append(target, stack_.data() + m, stack_.data() + stack_.size());
  stack_.resize(m);
  if (!onto_below) push(target);
}

void pickle_machine::expect_kind(ref r, kind want, std::string_view op) {
  if (tree_.kind_of(r) != want)
    fail(fmt::format("{} applies to {}, and the value under it is {}", op, pickle_tree::name(want),
                     pickle_tree::name(tree_.kind_of(r))));
}

void pickle_machine::memo_put(std::uint64_t index) {
  if (index >= limits_.max_memo) fail(fmt::format("memo index {} is beyond any snapshot's", index));
  const ref r = top();
  if (const kind k = tree_.kind_of(r); k == kind::list || k == kind::tuple || k == kind::dict)
    tree_.containers_[pickle_tree::payload(r)].memo = index;
  if (index < memo_.size())
    memo_[index] = r;
  else if (index == memo_.size())
    memo_.push_back(r);
  else
    sparse_memo_[index] = r;
}

void pickle_machine::integer_bytes(std::size_t n) {
  if (n > limits_.max_string_bytes) fail(fmt::format("an integer of {} bytes", n));
  const std::string_view s = take(n);
  if (n == 0) {
    push(make_integer(0));
    return;
  }
  const bool negative = (static_cast<unsigned char>(s[n - 1]) & 0x80) != 0;
  // Bytes above the 8th must only extend the sign for the value to fit in 64 bits.
  const unsigned char fill_byte = negative ? 0xff : 0x00;
  for (std::size_t i = 8; i < n; ++i) {
    if (static_cast<unsigned char>(s[i]) != fill_byte) {
      push(make(kind::big_integer));
      return;
    }
  }
  std::uint64_t v = negative ? ~std::uint64_t{0} : 0;
  for (std::size_t i = std::min<std::size_t>(n, 8); i-- > 0;) {
    v = (v << 8) | static_cast<unsigned char>(s[i]);
  }
  if (n < 8 && negative) v |= ~std::uint64_t{0} << (8 * n);
  if (n > 8 && ((v >> 63) != 0) != negative) {  // the 64-bit value's sign disagrees with the number's
    push(make(kind::big_integer));
    return;
  }
  push(make_integer(static_cast<std::int64_t>(v)));
}

void pickle_machine::stop() {
  if (!marks_.empty()) fail("STOP with a MARK still open");
  if (stack_.size() != 1) fail(fmt::format("STOP with {} values on the stack, not 1", stack_.size()));
  tree_.root_ = stack_.back();
  op_offset_ = offset();
  if (fill(1)) fail("bytes follow the pickle's STOP opcode");
}

inline void pickle_machine::step(unsigned char op) {
  switch (op) {
    case 0x80: {  // PROTO
      const unsigned proto = u8();
      if (proto < 2 || proto > 5) fail(fmt::format("pickle protocol {}; vram reads protocols 2 to 5", proto));
      return;
    }
    case 0x95:  // FRAME: the length of the frame that follows, a hint
      (void)le<8>();
      return;
    case '(':
      if (marks_.size() >= limits_.max_depth)
        fail(fmt::format("more than {} MARKs open at once: nested deeper than any snapshot", limits_.max_depth));
      marks_.push_back(stack_.size());
      return;
    case '0':  // POP: a value, or a MARK on top
      if (!marks_.empty() && marks_.back() == stack_.size())
        marks_.pop_back();
      else
        (void)pop();
      return;
    case '1':  // POP_MARK
      (void)pop_mark();
      return;
    case '2':  // DUP
      push(top());
      return;
    case 'N':
      push(make(kind::none));
      return;
    case 0x88:
      push(make(kind::boolean, 1));
      return;
    case 0x89:
      push(make(kind::boolean, 0));
      return;
    case 'J':
      push(make_integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(le<4>()))));
      return;
    case 'K':
      push(make_integer(static_cast<std::int64_t>(le<1>())));
      return;
    case 'M':
      push(make_integer(static_cast<std::int64_t>(le<2>())));
      return;
    case 0x8a:  // LONG1
      integer_bytes(le<1>());
      return;
    case 0x8b: {  // LONG4
      const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(le<4>()));
      if (n < 0) fail(fmt::format("LONG4 with a negative length {}", n));
      integer_bytes(static_cast<std::size_t>(n));
      return;
    }
    case 'G': {  // BINFLOAT: 8 bytes, big-endian
      const std::string_view s = take(8);
      std::uint64_t bits = 0;
      for (char c : s) bits = (bits << 8) | static_cast<unsigned char>(c);
      tree_.wide_.push_back(static_cast<std::int64_t>(bits));
      push(make(kind::floating, tree_.wide_.size() - 1));
      return;
    }
    case 0x8c:  // SHORT_BINUNICODE
      push(make_text(kind::string, le<1>()));
      return;
    case 'X':  // BINUNICODE
      push(make_text(kind::string, le<4>()));
      return;
    case 0x8d:  // BINUNICODE8
      push(make_text(kind::string, le<8>()));
      return;
    case 'C':  // SHORT_BINBYTES
      push(make_text(kind::bytes, le<1>()));
      return;
    case 'B':  // BINBYTES
      push(make_text(kind::bytes, le<4>()));
      return;
    case 0x8e:  // BINBYTES8
      push(make_text(kind::bytes, le<8>()));
      return;
    case ']':
      push(make_container(kind::list));
      return;
    case 'l':
      collect(kind::list, false, "LIST");
      return;
    case ')':
      push(make_container(kind::tuple));
      return;
    case 't':
      collect(kind::tuple, false, "TUPLE");
      return;
    case 0x85:  // TUPLE1 .. TUPLE3
    case 0x86:
    case 0x87: {
      const std::size_t n = op - 0x84u;
      ref items[3];
      for (std::size_t k = n; k-- > 0;) items[k] = pop();
      const ref t = make_container(kind::tuple);
      append(t, items, items + n);
      push(t);
      return;
    }
    case '}':
      if (records_ != nullptr && records_->whole_entries && try_entry()) return;
      push(make_container(kind::dict));
      return;
    case 'd':
      collect(kind::dict, false, "DICT");
      return;
    case 'a': {  // APPEND
      const ref v = pop();
      const ref list = top();
      expect_kind(list, kind::list, "APPEND");
      append(list, &v, &v + 1);
      return;
    }
    case 'e':  // APPENDS
      collect(kind::list, true, "APPENDS");
      return;
    case 's': {  // SETITEM
      const ref kv[2] = {pop(), pop()};
      const ref d = top();
      expect_kind(d, kind::dict, "SETITEM");
      const ref pair[2] = {kv[1], kv[0]};
      append(d, pair, pair + 2);
      return;
    }
    case 'u':  // SETITEMS
      collect(kind::dict, true, "SETITEMS");
      return;
    case 0x94:  // MEMOIZE
      memo_put(memo_.size());
      return;
    case 'q':
      memo_put(le<1>());
      return;
    case 'r':
      memo_put(le<4>());
      return;
    case 'h':
      memo_get(le<1>());
      return;
    case 'j':
      memo_get(le<4>());
      return;
    default:
      break;
  }
  if (const std::string_view name = refused_name(op); !name.empty())
    fail(fmt::format("opcode {} ({:#04x}) names a Python object to build or call; a memory snapshot holds plain "
                     "data only, and vram never runs what a pickle names",
                     name, op));
  if (const std::string_view name = unused_name(op); !name.empty())
    fail(fmt::format("opcode {} ({:#04x}) is not one a memory snapshot uses", name, op));
  fail(fmt::format("{:#04x} is not a pickle opcode", op));
}


double pickle_tree::floating(ref r) const noexcept { return std::bit_cast<double>(wide_[payload(r)]); }

std::optional<pickle_tree::ref> pickle_tree::find(ref d, std::string_view key) const noexcept {
  const auto kv = items(d);
  for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
    if (kind_of(kv[i]) == kind::string && text(kv[i]) == key) return kv[i + 1];
  }
  return std::nullopt;
}

std::string_view pickle_tree::name(kind k) noexcept {
  switch (k) {
    case kind::none: return "None";
    case kind::boolean: return "a bool";
    case kind::integer: return "an int";
    case kind::big_integer: return "an int beyond 64 bits";
    case kind::floating: return "a float";
    case kind::string: return "a str";
    case kind::bytes: return "bytes";
    case kind::list: return "a list";
    case kind::tuple: return "a tuple";
    case kind::dict: return "a dict";
    case kind::record: return "a trace entry";
  }
  return "a value";
}

bool is_pickle(std::string_view bytes) noexcept {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 &&
         static_cast<unsigned char>(bytes[1]) >= 2 && static_cast<unsigned char>(bytes[1]) <= 5;
}

pickle_tree read_pickle(std::string start, const pickle_read& read, const std::string& path,
                        const pickle_limits& limits, const pickle_records* records) {
  pickle_tree tree;
  pickle_machine machine(tree, std::move(start), read, path, limits, records);
  machine.run();
  return tree;
}

}  // namespace vram::detail
