// From a pickled memory snapshot to one trace per device: the entries in order, then what was live before
// the first entry, inferred from the entries themselves and from the snapshot's segments.
#include "vram/trace/torch_snapshot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <span>

#include "vram/core/address_map.hpp"
#include "vram/core/error.hpp"

namespace vram::detail {

namespace {

using ref = pickle_tree::ref;
using kind = pickle_tree::kind;

std::optional<trace_action> action_named(std::string_view s) {
  static constexpr std::pair<std::string_view, trace_action> names[] = {
      {"alloc", trace_action::alloc},
      {"free_requested", trace_action::free_requested},
      {"free_completed", trace_action::free_completed},
      {"segment_alloc", trace_action::segment_alloc},
      {"segment_free", trace_action::segment_free},
      {"segment_map", trace_action::segment_map},
      {"segment_unmap", trace_action::segment_unmap},
      {"oom", trace_action::oom},
      {"snapshot", trace_action::snapshot},
  };
  for (const auto& [name, a] : names)
    if (name == s) return a;
  return std::nullopt;
}

// What the pickle machine compacts: every trace entry, less its frames.
constexpr pickle_records entry_records{"action", {"addr", "size", "stream", "time_us"}, "frames"};

std::string bytes_text(std::uint64_t n) { return fmt::format("{} bytes", n); }

// Where in the snapshot a value sits ("device_traces[0][17]", "segments[2]['blocks'][5] 'state'"), put
// into words only for an error: the reader passes one per entry.
struct place {
  static constexpr std::size_t none = static_cast<std::size_t>(-1);
  const char* list = nullptr;  // "device_traces" or "segments"; nullptr: the snapshot itself
  std::size_t first = none, second = none;
  const char* between = "";  // before the second index
  const char* key = nullptr;  // a key of the value, named after it

  place with_key(const char* k) const {
    place p = *this;
    p.key = k;
    return p;
  }
  std::string str() const {
    if (list == nullptr) return key == nullptr ? std::string() : fmt::format("'{}'", key);
    std::string s = fmt::format("{}[{}]", list, first);
    if (second != none) s += fmt::format("{}[{}]", between, second);
    if (key != nullptr) s += fmt::format(" '{}'", key);
    return s;
  }
};

class snapshot_reader {
 public:
  snapshot_reader(const pickle_tree& t, const std::string& path) : t_(t), path_(path) {}

  std::vector<snapshot_device_trace> read() {
    const ref root = t_.root();
    if (t_.kind_of(root) != kind::dict)
      fail(place{}, fmt::format("a pickle of {}, not a PyTorch memory snapshot (a dict with 'device_traces')",
                           pickle_tree::name(t_.kind_of(root))));
    const auto traces = t_.find(root, "device_traces");
    if (!traces)
      fail(place{}, "a pickled dict without 'device_traces': not a PyTorch memory snapshot, or one taken without "
               "torch.cuda.memory._record_memory_history()");
    expect(*traces, kind::list, place{}.with_key("device_traces"));
    std::vector<ref> segments;
    if (const auto segs = t_.find(root, "segments")) {
      expect(*segs, kind::list, place{}.with_key("segments"));
      const auto items = t_.items(*segs);
      segments.assign(items.begin(), items.end());
    }
    std::vector<snapshot_device_trace> out;
    const auto per_device = t_.items(*traces);
    for (std::size_t d = 0; d < per_device.size(); ++d) {
      expect(per_device[d], kind::list, place{"device_traces", d});
      if (t_.items(per_device[d]).empty()) continue;
      out.push_back(read_device(static_cast<int>(d), per_device[d], segments));
    }
    if (out.empty())
      fail(place{}, "a memory snapshot with no trace entries on any device: record them with "
               "torch.cuda.memory._record_memory_history() before the snapshot");
    return out;
  }

 private:
  [[noreturn]] void fail(const place& where, std::string_view problem) const {
    const std::string at = where.str();
    throw input_error(at.empty() ? fmt::format("{}: {}", path_, problem) : fmt::format("{}: {}: {}", path_, at, problem));
  }

  void expect(ref r, kind k, const place& where) const {
    if (t_.kind_of(r) != k)
      fail(where, fmt::format("{}, where a memory snapshot has {}", pickle_tree::name(t_.kind_of(r)),
                              pickle_tree::name(k)));
  }

  std::optional<ref> field(ref dict, std::string_view key) const { return t_.find(dict, key); }

  std::int64_t integer(ref dict, std::string_view key, const place& where) const {
    const auto v = field(dict, key);
    if (!v) fail(where, fmt::format("no '{}'", key));
    if (t_.kind_of(*v) != kind::integer)
      fail(where, fmt::format("'{}' is {}, not an int", key, pickle_tree::name(t_.kind_of(*v))));
    return t_.integer(*v);
  }

  std::uint64_t unsigned_integer(ref dict, std::string_view key, const place& where) const {
    const std::int64_t v = integer(dict, key, where);
    if (v < 0) fail(where, fmt::format("'{}' is negative ({})", key, v));
    return static_cast<std::uint64_t>(v);
  }

  // An entry's fields, from the record the pickle machine made of it or from the dict it left.
  struct entry_fields {
    std::string_view action;
    std::optional<std::int64_t> addr, size, stream, time_us;
  };

  entry_fields fields_of(ref e, const place& where) const {
    entry_fields f;
    if (t_.kind_of(e) == kind::record) {
      const auto& r = t_.record_of(e);
      f.action = t_.record_tag(e);
      std::optional<std::int64_t>* out[4] = {&f.addr, &f.size, &f.stream, &f.time_us};
      for (std::size_t k = 0; k < 4; ++k)
        if ((r.present & (1u << k)) != 0) *out[k] = r.fields[k];
      return f;
    }
    expect(e, kind::dict, where);
    const auto action_ref = field(e, "action");
    if (!action_ref) fail(where, "no 'action'");
    expect(*action_ref, kind::string, where.with_key("action"));
    f.action = t_.text(*action_ref);
    std::optional<std::int64_t>* out[4] = {&f.addr, &f.size, &f.stream, &f.time_us};
    for (std::size_t k = 0; k < 4; ++k)
      if (field(e, entry_records.fields[k])) *out[k] = integer(e, entry_records.fields[k], where);
    return f;
  }

  // At most how many events infer_start() puts before the first entry: one for each entry that frees a
  // block or a segment (entries it cannot read as records are counted too), one for each segment and each
  // block the snapshot lists, and one for memory mapped before. A bound, not a check: the entries and
  // segments are checked where they are read.
  std::size_t most_added_at_start(std::span<const ref> items, const std::vector<ref>& segments) const {
    std::size_t n = 1 + segments.size();
    std::uint64_t seen_tag = ~std::uint64_t{0};  // wider than any tag
    bool seen_frees = false;
    for (const ref e : items) {
      if (t_.kind_of(e) != kind::record) {
        ++n;
        continue;
      }
      const std::uint64_t tag = t_.record_of(e).tag;
      if (tag != seen_tag) {
        const auto action = action_named(t_.record_tag(e));
        seen_tag = tag;
        seen_frees = action == trace_action::free_requested || action == trace_action::segment_free;
      }
      n += seen_frees;
    }
    for (const ref seg : segments) {
      if (t_.kind_of(seg) != kind::dict) continue;
      if (const auto blocks = field(seg, "blocks"); blocks && t_.kind_of(*blocks) == kind::list)
        n += t_.items(*blocks).size();
    }
    return n;
  }

  snapshot_device_trace read_device(int device, ref entries, const std::vector<ref>& segments) {
    snapshot_device_trace out;
    out.device = device;
    std::size_t skipped_other = 0, clamped = 0, untimed = 0;
    std::vector<std::string> other_names;
    std::int64_t last_time = 0;
    const auto items = t_.items(entries);
    // Room for what infer_start() adds at the front too, so that it inserts in place: a vector reallocated
    // there would hold the trace twice for a moment (a million entries: 40 MB more at the peak).
    out.events.reserve(items.size() + most_added_at_start(items, segments));
    for (std::size_t i = 0; i < items.size(); ++i) {
      const place where{"device_traces", static_cast<std::size_t>(device), i};
      const ref e = items[i];
      const entry_fields f = fields_of(e, where);
      const std::string_view name = f.action;
      const auto action = action_named(name);
      if (!action) {
        ++skipped_other;
        if (other_names.size() < 4 && std::find(other_names.begin(), other_names.end(), name) == other_names.end())
          other_names.emplace_back(name);
        continue;
      }
      trace_event ev;
      ev.action = *action;
      if (!f.addr) fail(where, "no 'addr'");
      if (!f.size) fail(where, "no 'size'");
      if (*f.size < 0) fail(where, fmt::format("'size' is negative ({})", *f.size));
      ev.addr = static_cast<std::uint64_t>(*f.addr);  // an address; PyTorch writes it signed
      ev.size = static_cast<std::uint64_t>(*f.size);
      ev.stream = static_cast<std::uint64_t>(f.stream.value_or(0));
      if (f.time_us) {
        ev.time_us = *f.time_us;
        if (ev.time_us < 0) fail(where, fmt::format("'time_us' is negative ({})", ev.time_us));
      } else {
        ev.time_us = last_time;
        ++untimed;
      }
      if (ev.time_us < last_time) {
        ev.time_us = last_time;
        ++clamped;
      }
      last_time = ev.time_us;
      out.events.push_back(ev);
    }
    if (skipped_other > 0)
      out.notes.push_back(fmt::format("{} entries of other actions ({}) skipped", skipped_other,
                                      fmt::join(other_names, ", ")));
    if (untimed > 0) out.notes.push_back(fmt::format("{} entries without 'time_us' given the time before them", untimed));
    if (clamped > 0)
      out.notes.push_back(fmt::format("{} entries earlier than the entry before them given its time", clamped));
    infer_start(out, segments);
    return out;
  }

  // What was live before the first entry: see the header.
  void infer_start(snapshot_device_trace& out, const std::vector<ref>& segments) {
    address_map<std::uint64_t> live, segs;  // address -> bytes
    address_map<bool> pending;                // free_requested, not yet completed
    std::vector<trace_event> before;            // what is added at the start
    std::uint64_t freed_before = 0, freed_before_bytes = 0, orphans = 0;
    std::uint64_t segs_before = 0, segs_before_bytes = 0;
    __extension__ using int128 = __int128;
    int128 mapped = 0, lowest_mapped = 0;
    std::size_t kept = 0;  // events are kept in place, less the dropped ones
    for (std::size_t i = 0; i < out.events.size(); ++i) {
      const trace_event e = out.events[i];
      switch (e.action) {
        case trace_action::alloc:
          live.insert_or_assign(e.addr, e.size);
          pending.erase(e.addr);
          break;
        case trace_action::free_requested:
          if (!live.erase(e.addr)) {
            before.push_back(trace_event{0, e.addr, e.size, e.stream, trace_action::alloc});
            ++freed_before;
            freed_before_bytes += e.size;
          }
          pending.insert_or_assign(e.addr, true);
          break;
        case trace_action::free_completed:
          if (!pending.erase(e.addr)) {
            ++orphans;
            continue;  // dropped: its block was never seen
          }
          break;
        case trace_action::segment_alloc:
          segs.insert_or_assign(e.addr, e.size);
          break;
        case trace_action::segment_free:
          if (!segs.erase(e.addr)) {
            before.push_back(trace_event{0, e.addr, e.size, e.stream, trace_action::segment_alloc});
            ++segs_before;
            segs_before_bytes += e.size;
          }
          break;
        case trace_action::segment_map:
          mapped += e.size;
          break;
        case trace_action::segment_unmap:
          mapped -= e.size;
          lowest_mapped = std::min(lowest_mapped, mapped);
          break;
        default:
          break;
      }
      out.events[kept++] = e;
    }
    out.events.resize(kept);
    // Unmapped in the trace more than it mapped: the rest was mapped before it.
    std::uint64_t premapped = lowest_mapped < 0 ? static_cast<std::uint64_t>(-lowest_mapped) : 0;
    const std::uint64_t mapped_in_trace = premapped;

    // The snapshot's segments: the allocator's state at the end.
    std::uint64_t blocks_at_end = 0, blocks_at_end_bytes = 0;
    std::uint64_t expandable_total = 0;
    std::optional<std::uint64_t> expandable_addr;
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const place where{"segments", s};
      const ref seg = segments[s];
      expect(seg, kind::dict, where);
      if (field(seg, "device") && integer(seg, "device", where) != out.device) continue;
      const std::uint64_t address = static_cast<std::uint64_t>(integer(seg, "address", where));
      const std::uint64_t total = unsigned_integer(seg, "total_size", where);
      const auto expandable = field(seg, "is_expandable");
      const bool is_expandable = expandable && t_.kind_of(*expandable) == kind::boolean && t_.integer(*expandable) != 0;
      if (is_expandable) {
        expandable_total += total;
        if (!expandable_addr) expandable_addr = address;
      } else if (!segs.contains(address)) {
        before.push_back(trace_event{0, address, total, 0, trace_action::segment_alloc});
        segs.insert_or_assign(address, total);
        ++segs_before;
        segs_before_bytes += total;
      }
      const auto blocks = field(seg, "blocks");
      if (!blocks) continue;
      expect(*blocks, kind::list, where.with_key("blocks"));
      const auto block_items = t_.items(*blocks);
      for (std::size_t b = 0; b < block_items.size(); ++b) {
        const place bwhere{"segments", s, b, "['blocks']"};
        const ref block = block_items[b];
        expect(block, kind::dict, bwhere);
        const auto state = field(block, "state");
        if (!state || t_.kind_of(*state) != kind::string || t_.text(*state) != "active_allocated") continue;
        const std::uint64_t addr = static_cast<std::uint64_t>(integer(block, "address", bwhere));
        if (live.contains(addr)) continue;
        // Live at the end and never allocated in the trace: allocated before it, and never freed.
        const std::uint64_t size = field(block, "requested_size") ? unsigned_integer(block, "requested_size", bwhere)
                                                                   : unsigned_integer(block, "size", bwhere);
        const std::uint64_t stream = field(seg, "stream") ? static_cast<std::uint64_t>(integer(seg, "stream", where)) : 0;
        before.push_back(trace_event{0, addr, size, stream, trace_action::alloc});
        live.insert_or_assign(addr, size);
        ++blocks_at_end;
        blocks_at_end_bytes += size;
      }
    }
    // Expandable segments: what is mapped at the end and the trace did not map was mapped before it.
    const int128 mapped_at_end_by_trace = static_cast<int128>(premapped) + mapped;
    if (static_cast<int128>(expandable_total) > mapped_at_end_by_trace)
      premapped += static_cast<std::uint64_t>(static_cast<int128>(expandable_total) - mapped_at_end_by_trace);
    if (premapped > 0) before.push_back(trace_event{0, expandable_addr.value_or(0), premapped, 0, trace_action::segment_map});

    if (before.empty() && orphans == 0) return;
    const std::int64_t t0 = out.events.empty() ? 0 : out.events.front().time_us;
    // Segments first, then the blocks in them, all at the first entry's time.
    std::stable_sort(before.begin(), before.end(), [](const trace_event& a, const trace_event& b) {
      const auto rank = [](trace_action x) { return x == trace_action::alloc ? 1 : 0; };
      return rank(a.action) < rank(b.action);
    });
    for (auto& e : before) e.time_us = t0;
    out.events.insert(out.events.begin(), before.begin(), before.end());

    if (freed_before + blocks_at_end > 0)
      out.notes.push_back(fmt::format(
          "{} blocks ({}) were live before the first entry: {} freed in the trace without an alloc in it, {} live "
          "in the snapshot's segments without one; each counted as live from the first entry",
          freed_before + blocks_at_end, bytes_text(freed_before_bytes + blocks_at_end_bytes), freed_before,
          blocks_at_end));
    if (segs_before > 0)
      out.notes.push_back(fmt::format("{} segments ({}) were reserved before the first entry (freed in the trace or "
                                      "in the snapshot without a segment_alloc in it): counted from the first entry",
                                      segs_before, bytes_text(segs_before_bytes)));
    if (premapped > 0)
      out.notes.push_back(fmt::format("{} of expandable segments were mapped before the first entry{}: counted from "
                                      "the first entry",
                                      bytes_text(premapped),
                                      mapped_in_trace > 0 ? " (unmapped in the trace or mapped in the snapshot)"
                                                          : " (mapped in the snapshot's segments)"));
    if (orphans > 0)
      out.notes.push_back(fmt::format("{} free_completed entries of blocks the trace never saw allocated or freed "
                                      "dropped",
                                      orphans));
    if (freed_before > 0 || orphans > 0)
      out.notes.push_back(
          "the trace begins after the program's first allocations: recording began late, or the ring buffer "
          "(_record_memory_history's max_entries) dropped the oldest entries");
  }

  const pickle_tree& t_;
  const std::string& path_;
};

}  // namespace

const pickle_records& snapshot_records() noexcept { return entry_records; }

std::vector<snapshot_device_trace> read_torch_snapshot(const pickle_tree& tree, const std::string& path) {
  return snapshot_reader(tree, path).read();
}

}  // namespace vram::detail
