// The pickle stack machine: one opcode at a time, from a buffer refilled 1 MiB at a time, so that a length
// an opcode claims costs only the bytes that really arrive. Containers and strings go to the tree's flat
// arrays; the stack, the marks and the memo hold references into them.
#include "vram/trace/pickle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "vram/core/error.hpp"

namespace vram::detail {

namespace {

constexpr std::size_t chunk_bytes = 1u << 20;
constexpr pickle_tree::ref no_ref = std::numeric_limits<pickle_tree::ref>::max();

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

class pickle_machine {
 public:
  pickle_machine(pickle_tree& tree, std::string start, const pickle_read& read, const std::string& path,
                 const pickle_limits& limits)
      : tree_(tree), buf_(std::move(start)), read_(read), path_(path), limits_(limits) {}

  void run() {
    for (;;) {
      op_offset_ = offset();
      const unsigned char op = u8();
      if (op == '.') {
        stop();
        return;
      }
      step(op);
    }
  }

 private:
  using ref = pickle_tree::ref;
  using kind = pickle_tree::kind;

  [[noreturn]] void fail(std::string_view problem) const {
    throw input_error(fmt::format("{}: byte {}: {}", path_, op_offset_, problem));
  }

  std::uint64_t offset() const noexcept { return base_ + pos_; }

  // Makes @p need bytes available from pos_, reading as they arrive; false when the input ends first.
  bool fill(std::size_t need) {
    if (buf_.size() - pos_ >= need) return true;
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

  std::string_view take(std::size_t n) {
    if (!fill(n))
      fail(fmt::format("the input ends inside the opcode (it needs {} more bytes, {} are left)", n,
                       buf_.size() - pos_));
    const std::string_view s(buf_.data() + pos_, n);
    pos_ += n;
    return s;
  }

  unsigned char u8() {
    if (!fill(1)) {
      op_offset_ = offset();
      fail("the input ends before the pickle's STOP opcode (truncated)");
    }
    return static_cast<unsigned char>(buf_[pos_++]);
  }

  std::uint64_t le(std::size_t n) {
    const std::string_view s = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(s[i]);
    return v;
  }

  ref add(kind k, std::uint32_t aux = 0, std::int64_t i = 0) {
    if (tree_.nodes_.size() >= no_ref) fail("more values than a snapshot holds (2^32)");
    tree_.nodes_.push_back(pickle_tree::node{k, aux, i});
    return static_cast<ref>(tree_.nodes_.size() - 1);
  }

  ref add_container(kind k, std::vector<ref> items = {}) {
    tree_.containers_.push_back(std::move(items));
    return add(k, static_cast<std::uint32_t>(tree_.containers_.size() - 1));
  }

  ref add_text(kind k, std::size_t n) {
    if (n > limits_.max_string_bytes)
      fail(fmt::format("a string of {} bytes, more than the {} any snapshot holds", n, limits_.max_string_bytes));
    const std::string_view s = take(n);
    auto it = tree_.interned_.find(s);
    if (it == tree_.interned_.end()) {
      tree_.strings_.emplace_back(s);
      it = tree_.interned_.emplace(tree_.strings_.back(), static_cast<std::uint32_t>(tree_.strings_.size() - 1)).first;
    }
    return add(k, it->second);
  }

  void push(ref r) { stack_.push_back(r); }

  ref pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("the opcode needs a value and the stack has none");
    const ref r = stack_.back();
    stack_.pop_back();
    return r;
  }

  ref top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("the opcode needs a value and the stack has none");
    return stack_.back();
  }

  // The values above the last MARK, which is removed.
  std::vector<ref> pop_mark() {
    if (marks_.empty()) fail("the opcode needs a MARK and there is none");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ref> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  std::vector<ref>& container(ref r, kind want, std::string_view op) {
    if (tree_.kind_of(r) != want)
      fail(fmt::format("{} applies to {}, and the value under it is {}", op, pickle_tree::name(want),
                       pickle_tree::name(tree_.kind_of(r))));
    return tree_.containers_[tree_.nodes_[r].aux];
  }

  // Picklers number the memo 0, 1, 2, ...: those indexes go to a vector; any other (a hand-made pickle's
  // BINPUT 2^28) to a map, so that one opcode cannot make the memo large.
  void memo_put(std::uint64_t index) {
    if (index >= limits_.max_memo) fail(fmt::format("memo index {} is beyond any snapshot's", index));
    const ref r = top();
    if (index < memo_.size())
      memo_[index] = r;
    else if (index == memo_.size())
      memo_.push_back(r);
    else
      sparse_memo_[index] = r;
  }

  void memo_get(std::uint64_t index) {
    if (index < memo_.size()) {
      push(memo_[index]);
      return;
    }
    const auto it = sparse_memo_.find(index);
    if (it == sparse_memo_.end()) fail(fmt::format("memo index {} was never stored", index));
    push(it->second);
  }

  void integer_bytes(std::size_t n) {
    if (n > limits_.max_string_bytes) fail(fmt::format("an integer of {} bytes", n));
    const std::string_view s = take(n);
    if (n == 0) {
      push(add(kind::integer, 0, 0));
      return;
    }
    const bool negative = (static_cast<unsigned char>(s[n - 1]) & 0x80) != 0;
    // Bytes above the 8th must only extend the sign for the value to fit in 64 bits.
    const unsigned char fill_byte = negative ? 0xff : 0x00;
    for (std::size_t i = 8; i < n; ++i) {
      if (static_cast<unsigned char>(s[i]) != fill_byte) {
        push(add(kind::big_integer));
        return;
      }
    }
    std::uint64_t v = negative ? ~std::uint64_t{0} : 0;
    for (std::size_t i = std::min<std::size_t>(n, 8); i-- > 0;) {
      v = (v << 8) | static_cast<unsigned char>(s[i]);
    }
    if (n < 8 && negative) v |= ~std::uint64_t{0} << (8 * n);
    if (n > 8 && ((v >> 63) != 0) != negative) {  // the 64-bit value's sign disagrees with the number's
      push(add(kind::big_integer));
      return;
    }
    push(add(kind::integer, 0, static_cast<std::int64_t>(v)));
  }

  void stop() {
    if (!marks_.empty()) fail("STOP with a MARK still open");
    if (stack_.size() != 1) fail(fmt::format("STOP with {} values on the stack, not 1", stack_.size()));
    tree_.root_ = stack_.back();
    op_offset_ = offset();
    if (fill(1)) fail("bytes follow the pickle's STOP opcode");
  }

  void step(unsigned char op) {
    switch (op) {
      case 0x80: {  // PROTO
        const unsigned proto = u8();
        if (proto < 2 || proto > 5) fail(fmt::format("pickle protocol {}; vram reads protocols 2 to 5", proto));
        return;
      }
      case 0x95:  // FRAME: the length of the frame that follows, a hint
        (void)le(8);
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
        push(add(kind::none));
        return;
      case 0x88:
        push(add(kind::boolean, 0, 1));
        return;
      case 0x89:
        push(add(kind::boolean, 0, 0));
        return;
      case 'J':
        push(add(kind::integer, 0, static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)))));
        return;
      case 'K':
        push(add(kind::integer, 0, static_cast<std::int64_t>(le(1))));
        return;
      case 'M':
        push(add(kind::integer, 0, static_cast<std::int64_t>(le(2))));
        return;
      case 0x8a:  // LONG1
        integer_bytes(le(1));
        return;
      case 0x8b: {  // LONG4
        const auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)));
        if (n < 0) fail(fmt::format("LONG4 with a negative length {}", n));
        integer_bytes(static_cast<std::size_t>(n));
        return;
      }
      case 'G': {  // BINFLOAT: 8 bytes, big-endian
        const std::string_view s = take(8);
        std::uint64_t bits = 0;
        for (char c : s) bits = (bits << 8) | static_cast<unsigned char>(c);
        push(add(kind::floating, 0, static_cast<std::int64_t>(bits)));
        return;
      }
      case 0x8c:  // SHORT_BINUNICODE
        push(add_text(kind::string, le(1)));
        return;
      case 'X':  // BINUNICODE
        push(add_text(kind::string, le(4)));
        return;
      case 0x8d:  // BINUNICODE8
        push(add_text(kind::string, le(8)));
        return;
      case 'C':  // SHORT_BINBYTES
        push(add_text(kind::bytes, le(1)));
        return;
      case 'B':  // BINBYTES
        push(add_text(kind::bytes, le(4)));
        return;
      case 0x8e:  // BINBYTES8
        push(add_text(kind::bytes, le(8)));
        return;
      case ']':
        push(add_container(kind::list));
        return;
      case 'l':
        push(add_container(kind::list, pop_mark()));
        return;
      case ')':
        push(add_container(kind::tuple));
        return;
      case 't':
        push(add_container(kind::tuple, pop_mark()));
        return;
      case 0x85: {
        const ref a = pop();
        push(add_container(kind::tuple, {a}));
        return;
      }
      case 0x86: {
        const ref b = pop(), a = pop();
        push(add_container(kind::tuple, {a, b}));
        return;
      }
      case 0x87: {
        const ref c = pop(), b = pop(), a = pop();
        push(add_container(kind::tuple, {a, b, c}));
        return;
      }
      case '}':
        push(add_container(kind::dict));
        return;
      case 'd': {
        std::vector<ref> items = pop_mark();
        if (items.size() % 2 != 0) fail("DICT with an odd number of values (a key without its value)");
        push(add_container(kind::dict, std::move(items)));
        return;
      }
      case 'a': {  // APPEND
        const ref v = pop();
        container(top(), kind::list, "APPEND").push_back(v);
        return;
      }
      case 'e': {  // APPENDS
        std::vector<ref> items = pop_mark();
        auto& list = container(top(), kind::list, "APPENDS");
        list.insert(list.end(), items.begin(), items.end());
        return;
      }
      case 's': {  // SETITEM
        const ref v = pop(), k = pop();
        auto& d = container(top(), kind::dict, "SETITEM");
        d.push_back(k);
        d.push_back(v);
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<ref> items = pop_mark();
        if (items.size() % 2 != 0) fail("SETITEMS with an odd number of values (a key without its value)");
        auto& d = container(top(), kind::dict, "SETITEMS");
        d.insert(d.end(), items.begin(), items.end());
        return;
      }
      case 0x94:  // MEMOIZE
        memo_put(memo_.size());
        return;
      case 'q':
        memo_put(le(1));
        return;
      case 'r':
        memo_put(le(4));
        return;
      case 'h':
        memo_get(le(1));
        return;
      case 'j':
        memo_get(le(4));
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

  pickle_tree& tree_;
  std::string buf_;
  std::size_t pos_ = 0;
  std::uint64_t base_ = 0;  // the input offset of buf_[0]
  bool eof_ = false;
  std::size_t read_size_ = 4096;
  const pickle_read& read_;
  const std::string& path_;
  const pickle_limits& limits_;
  std::uint64_t op_offset_ = 0;
  std::vector<ref> stack_;
  std::vector<std::size_t> marks_;
  std::vector<ref> memo_;
  std::unordered_map<std::uint64_t, ref> sparse_memo_;
};

double pickle_tree::floating(ref r) const noexcept { return std::bit_cast<double>(nodes_[r].i); }

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
  }
  return "a value";
}

bool is_pickle(std::string_view bytes) noexcept {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x80 &&
         static_cast<unsigned char>(bytes[1]) >= 2 && static_cast<unsigned char>(bytes[1]) <= 5;
}

pickle_tree read_pickle(std::string start, const pickle_read& read, const std::string& path,
                        const pickle_limits& limits) {
  pickle_tree tree;
  pickle_machine machine(tree, std::move(start), read, path, limits);
  machine.run();
  return tree;
}

}  // namespace vram::detail
