// The pickle stack machine: one opcode at a time, from a buffer refilled 1 MiB at a time, so that a length
// an opcode claims costs only the bytes that really arrive. Containers and strings go to the tree's flat
// arrays; the stack, the marks and the memo hold references into them.
#include "vram/trace/pickle.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>

#include "vram/core/error.hpp"

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

class pickle_machine {
 public:
  pickle_machine(pickle_tree& tree, std::string start, const pickle_read& read, const std::string& path,
                 const pickle_limits& limits, const pickle_records* records)
      : tree_(tree), buf_(std::move(start)), read_(read), path_(path), limits_(limits), records_(records) {}

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
  bool fill(std::size_t need) { return buf_.size() - pos_ >= need || refill(need); }

  [[gnu::noinline]] bool refill(std::size_t need) {
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

  static ref make(kind k, std::uint64_t payload = 0) {
    return (static_cast<std::uint64_t>(k) << pickle_tree::tag_shift) | payload;
  }

  ref make_integer(std::int64_t v) {
    constexpr std::int64_t limit = std::int64_t{1} << (pickle_tree::tag_shift - 1);
    if (v >= -limit && v < limit) return make(kind::integer, static_cast<std::uint64_t>(v) & pickle_tree::payload_mask);
    tree_.wide_.push_back(v);
    return (std::uint64_t{pickle_tree::boxed_integer_tag} << pickle_tree::tag_shift) | (tree_.wide_.size() - 1);
  }

  ref make_container(kind k) {
    pickle_tree::container c;
    c.born = tree_.items_.size();
    if (!free_containers_.empty()) {  // the slot of a dict made a record, or of dropped frames
      const std::uint64_t slot = free_containers_.back();
      free_containers_.pop_back();
      tree_.containers_[slot] = c;
      return make(k, slot);
    }
    tree_.containers_.push_back(c);
    return make(k, tree_.containers_.size() - 1);
  }

  // Appends [first, last) to container @p r: in place while it has room or ends the shared array, else
  // moved to the array's end with twice the room (a container filled in one batch gets exactly its size).
  void append(ref r, const ref* first, const ref* last) {
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

  ref make_text(kind k, std::size_t n) {
    if (n > limits_.max_string_bytes)
      fail(fmt::format("a string of {} bytes, more than the {} any snapshot holds", n, limits_.max_string_bytes));
    const std::string_view s = take(n);
    auto it = tree_.interned_.find(s);
    if (it == tree_.interned_.end()) {
      tree_.strings_.emplace_back(s);
      it = tree_.interned_.emplace(tree_.strings_.back(), tree_.strings_.size() - 1).first;
    }
    return make(k, it->second);
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

  // Removes the last MARK; the values above it are stack_[its position, end).
  std::size_t pop_mark() {
    if (marks_.empty()) fail("the opcode needs a MARK and there is none");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }

  // Moves the values above the last MARK into a new container of kind @p k, or onto the container under
  // the MARK (APPENDS, SETITEMS) when @p onto_below.
  void collect(kind k, bool onto_below, std::string_view op) {
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

  // The dict under stack_[m - 1], whose items are stack_[m, end), as a record (pickle_records): false, and
  // nothing changed, when it is not one.
  bool compact(ref dict, std::size_t m) {
    pickle_tree::record rec;
    bool tagged = false;
    std::optional<ref> dropped;
    for (std::size_t i = m; i + 1 < stack_.size(); i += 2) {
      const ref k = stack_[i], v = stack_[i + 1];
      if (tree_.kind_of(k) != kind::string) return false;
      const int role = role_of(pickle_tree::payload(k));
      if (role == role_tag) {
        if (tree_.kind_of(v) != kind::string) return false;
        rec.tag = pickle_tree::payload(v);
        tagged = true;
      } else if (role >= 0 && role < 4) {
        if (tree_.kind_of(v) != kind::integer) return false;
        rec.fields[role] = tree_.integer(v);
        rec.present |= static_cast<std::uint8_t>(1u << role);
      } else if (role == role_dropped && tree_.kind_of(v) == kind::list) {
        dropped = v;
      }
    }
    if (!tagged) return false;
    tree_.records_.push_back(rec);
    const ref r = make(kind::record, tree_.records_.size() - 1);
    if (dropped) drop_frames(*dropped, tree_.containers_[pickle_tree::payload(dict)].born);
    // The record replaces the dict under the MARK and in the memo, and the dict's slot is reused. (A
    // hand-made pickle that kept another reference to the dict, by DUP, reads another container there: a
    // wrong value, never a wrong access.)
    stack_[m - 1] = r;
    if (const std::uint64_t slot = tree_.containers_[pickle_tree::payload(dict)].memo; slot != ~std::uint64_t{0}) {
      if (slot < memo_.size()) memo_[slot] = r;
      else sparse_memo_[slot] = r;
    }
    free_containers_.push_back(pickle_tree::payload(dict));
    stack_.resize(m);
    return true;
  }

  // The dropped list of a compacted dict (PyTorch's frames: a list of flat dicts), when it was made after the
  // dict (an older one, fetched from the memo, stays as it is): its slot and those of the containers made
  // inside it are reused, and their items go where they end the shared array. Each container's items are
  // its own, so cutting them touches no other container; a later memo fetch of a freed one reads another
  // container: a wrong value, never a wrong access.
  void drop_frames(ref list, std::uint64_t dict_born) {
    constexpr std::uint64_t freed = ~std::uint64_t{0};
    const std::uint64_t slot = pickle_tree::payload(list);
    const pickle_tree::container c = tree_.containers_[slot];
    if (c.born == freed || c.born < dict_born) return;
    regions_.clear();
    auto release = [&](std::uint64_t s) {
      auto& x = tree_.containers_[s];
      regions_.emplace_back(x.offset, x.capacity);
      x = pickle_tree::container{};
      x.born = freed;
      free_containers_.push_back(s);
    };
    for (const ref item : tree_.items(list)) {
      const kind k = tree_.kind_of(item);
      if (k != kind::dict && k != kind::list && k != kind::tuple) continue;
      const std::uint64_t child = pickle_tree::payload(item);
      const std::uint64_t born = tree_.containers_[child].born;
      if (child != slot && born != freed && born >= c.born) release(child);  // made inside the list, once
    }
    release(slot);
    std::sort(regions_.begin(), regions_.end(), std::greater<>());
    for (const auto& [offset, capacity] : regions_) {
      if (capacity == 0) continue;
      if (offset + capacity != tree_.items_.size()) break;
      tree_.items_.resize(offset);
    }
  }

  // What the interned string @p id is as a key of a record (pickle_records): a field's index, role_tag,
  // role_dropped or role_other; worked out once a string.
  static constexpr int role_tag = 4, role_dropped = 5, role_other = 6;
  int role_of(std::uint64_t id) {
    if (id >= roles_.size()) roles_.resize(id + 1, -1);
    if (roles_[id] >= 0) return roles_[id];
    const std::string_view key = tree_.strings_[id];
    int role = role_other;
    if (key == records_->tag_key) role = role_tag;
    else if (key == records_->dropped_key) role = role_dropped;
    for (int f = 0; f < 4; ++f)
      if (key == records_->fields[f]) role = f;
    roles_[id] = static_cast<std::int8_t>(role);
    return role;
  }

  void expect_kind(ref r, kind want, std::string_view op) {
    if (tree_.kind_of(r) != want)
      fail(fmt::format("{} applies to {}, and the value under it is {}", op, pickle_tree::name(want),
                       pickle_tree::name(tree_.kind_of(r))));
  }

  // Picklers number the memo 0, 1, 2, ...: those indexes go to a vector; any other (a hand-made pickle's
  // BINPUT 2^28) to a map, so that one opcode cannot make the memo large.
  void memo_put(std::uint64_t index) {
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
        push(make(kind::none));
        return;
      case 0x88:
        push(make(kind::boolean, 1));
        return;
      case 0x89:
        push(make(kind::boolean, 0));
        return;
      case 'J':
        push(make_integer(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)))));
        return;
      case 'K':
        push(make_integer(static_cast<std::int64_t>(le(1))));
        return;
      case 'M':
        push(make_integer(static_cast<std::int64_t>(le(2))));
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
        tree_.wide_.push_back(static_cast<std::int64_t>(bits));
        push(make(kind::floating, tree_.wide_.size() - 1));
        return;
      }
      case 0x8c:  // SHORT_BINUNICODE
        push(make_text(kind::string, le(1)));
        return;
      case 'X':  // BINUNICODE
        push(make_text(kind::string, le(4)));
        return;
      case 0x8d:  // BINUNICODE8
        push(make_text(kind::string, le(8)));
        return;
      case 'C':  // SHORT_BINBYTES
        push(make_text(kind::bytes, le(1)));
        return;
      case 'B':  // BINBYTES
        push(make_text(kind::bytes, le(4)));
        return;
      case 0x8e:  // BINBYTES8
        push(make_text(kind::bytes, le(8)));
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
  const pickle_records* records_;
  std::uint64_t op_offset_ = 0;
  std::vector<ref> stack_;
  std::vector<std::size_t> marks_;
  std::vector<ref> memo_;
  std::unordered_map<std::uint64_t, ref> sparse_memo_;
  std::vector<std::uint64_t> free_containers_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> regions_;  // drop_frames' scratch: (offset, capacity)
  std::vector<std::int8_t> roles_;  // by string id; -1: not worked out yet
};

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
