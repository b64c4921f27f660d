// The report's data: two replays per policy (the first for the series, peaks and failures, the second for
// the states at the moments those choose), fit, and the trade-off curve.
#include "vram/report/report_data.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "vram/core/size.hpp"
#include "vram/policies/registry.hpp"
#include "vram/replay/fit.hpp"
#include "vram/replay/replay.hpp"
#include "vram/report/envelope.hpp"
#include "vram/report/memory_map.hpp"
#include "vram/report/replay_report.hpp"

namespace vram {

namespace {

constexpr std::size_t none = static_cast<std::size_t>(-1);

bool program_row(const trace_event& e) {
  return e.action == trace_action::alloc || e.action == trace_action::free_requested;
}

/// Pass one: the series, the rows of the peaks and of the first failure.
class series_watch final : public replay_observer {
 public:
  series_watch(std::int64_t span_us, std::size_t points) : live(0, span_us, points), reserved(0, span_us, points) {}

  void step(const replay_step& s, const live_blocks&) override {
    live.add(s.time_us, s.live_bytes);
    reserved.add(s.time_us, s.reserved_bytes);
    if (peak_live_row == none || s.live_bytes > peak_live) peak_live = s.live_bytes, peak_live_row = s.index;
    if (peak_reserved_row == none || s.reserved_bytes > peak_reserved)
      peak_reserved = s.reserved_bytes, peak_reserved_row = s.index;
    if (s.failed && first_failure_row == none) {
      first_failure_row = s.index;
      first_failure_us = s.time_us;
      first_failure_request = s.request_bytes;
    }
  }

  envelope live, reserved;
  std::size_t peak_live = 0, peak_live_row = none;
  std::size_t peak_reserved = 0, peak_reserved_row = none;
  std::size_t first_failure_row = none, first_failure_request = 0;
  std::int64_t first_failure_us = 0;
};

const char* kind_name(device_region::kind k) {
  switch (k) {
    case device_region::kind::legacy_page: return "page";
    case device_region::kind::legacy_block: return "segment";
    case device_region::kind::mapping: return "mapped";
  }
  return "?";
}

nlohmann::json state_json(const replay_step& s, const memory_state& m, std::size_t unit) {
  nlohmann::json strips = nlohmann::json::array();
  for (const map_strip& strip : m.strips)
    strips.push_back({fmt::format("0x{:x}", strip.va), strip.bytes, kind_name(strip.what), strip.regions,
                      encode_cells(strip, unit)});
  return {{"live_bytes", s.live_bytes},
          {"reserved_bytes", s.reserved_bytes},
          {"failed", s.failed},
          {"held_bytes", m.held_bytes},
          {"held_live_bytes", m.live_bytes},
          {"free_bytes", m.held_bytes - m.live_bytes},
          {"free_pieces", m.free_pieces},
          {"largest_free", m.largest_free},
          {"device_free", m.device_free},
          {"device_total", m.device_total},
          {"strips", std::move(strips)}};
}

/// Pass two: the allocator's state at the chosen rows.
class state_watch final : public replay_observer {
 public:
  state_watch(sim_device& dev, const std::vector<std::size_t>& rows, std::size_t unit)
      : dev_(dev), rows_(rows), unit_(unit), states(rows.size()) {}

  void step(const replay_step& s, const live_blocks& blocks) override {
    while (next_ < rows_.size() && rows_[next_] < s.index) ++next_;
    if (next_ == rows_.size() || rows_[next_] != s.index) return;
    std::vector<std::pair<device_ptr, std::size_t>> b;
    blocks.for_each([&b](device_ptr p, std::size_t n) { b.emplace_back(p, n); });
    const auto regions = dev_.regions();
    states[next_++] = state_json(s, capture_state(regions, std::move(b), dev_.mem_info()), unit_);
  }

 private:
  sim_device& dev_;
  const std::vector<std::size_t>& rows_;
  std::size_t unit_;
  std::size_t next_ = 0;

 public:
  std::vector<nlohmann::json> states;  // by row; null where the row was not reached
};

}  // namespace

nlohmann::json delta_encode(const std::vector<std::size_t>& values) {
  nlohmann::json out = nlohmann::json::array();
  std::size_t last = 0;
  for (const std::size_t v : values) {
    // Differences of byte counts below 2^63 fit in a signed 64-bit integer, and JSON readers keep them exact
    // below 2^53 (a page's numbers are doubles): no device holds 8 PiB.
    out.push_back(static_cast<std::int64_t>(v) - static_cast<std::int64_t>(last));
    last = v;
  }
  return out;
}

std::vector<std::size_t> delta_decode(const nlohmann::json& deltas) {
  std::vector<std::size_t> out;
  out.reserve(deltas.size());
  std::int64_t v = 0;
  for (const auto& d : deltas) out.push_back(static_cast<std::size_t>(v += d.get<std::int64_t>()));
  return out;
}

std::vector<std::string> curve_settings() {
  return {"small_handle=2MiB", "small_handle=4MiB", "", "small_handle=16MiB", "small_handle=0",
          "max_cached_ratio=0", "max_cached_ratio=0.25"};
}

std::size_t program_row_at(const trace& t, double seconds) {
  const std::int64_t t0 = t.events.empty() ? 0 : t.events.front().time_us;
  const double at_us = seconds * 1e6;
  std::size_t found = none, first = none;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (!program_row(e)) continue;
    if (first == none) first = i;
    if (static_cast<double>(e.time_us - t0) > at_us) break;
    found = i;
  }
  return found != none ? found : first;
}

std::string failure_sentence(const nlohmann::json& failure, const nlohmann::json& state,
                             const std::vector<nlohmann::json>& others) {
  const auto bytes = [](const nlohmann::json& v) { return format_bytes(v.get<std::size_t>()); };
  const std::string policy = failure.at("policy");
  const std::size_t held_free = state.at("free_bytes"), device_free = state.at("device_free");
  std::string s = fmt::format("At {} a {} request failed under {} with {} free: ",
                              format_duration(failure.at("seconds").get<double>()), bytes(failure.at("request_bytes")),
                              policy, format_bytes(held_free + device_free));
  const std::size_t pieces = state.at("free_pieces");
  if (pieces == 0)
    s += fmt::format("nothing held spare by {}, and {} left on the device.", policy, format_bytes(device_free));
  else
    s += fmt::format("{} held by {} in {} {}, the largest {}, and {} left on the device.", format_bytes(held_free),
                     policy, pieces, pieces == 1 ? "piece" : "pieces", bytes(state.at("largest_free")),
                     format_bytes(device_free));
  for (const nlohmann::json& o : others) {
    const std::string name = o.at("policy");
    if (o.at("failed_before").get<bool>()) {
      s += fmt::format(" Under {} it failed too.", name);
      continue;
    }
    const double live = o.at("live_bytes").get<double>(), reserved = o.at("reserved_bytes").get<double>();
    s += fmt::format(" Under {} it would have succeeded, holding {:.2f}x the live bytes then.", name,
                     live > 0 ? reserved / live : 0.0);
  }
  return s;
}

nlohmann::json report_trace(const trace& t, const report_options& o) {
  const auto say = [&](const std::string& what) {
    if (o.progress) o.progress(what);
  };
  const std::int64_t t0 = t.events.empty() ? 0 : t.events.front().time_us;
  const std::int64_t span_us = t.events.empty() ? 0 : t.events.back().time_us - t0;
  std::size_t program_rows = 0;
  for (const auto& e : t.events) program_rows += program_row(e);

  // Pass one: every policy's replay, with its series.
  std::vector<replay_result> results;
  std::vector<series_watch> watches;
  watches.reserve(o.policies.size());
  for (const auto& policy : o.policies) {
    say(fmt::format("{}: replaying {} events with {}", t.name, t.events.size(), policy));
    sim_device dev(o.device);
    auto resource = make_resource(policy, dev);
    watches.emplace_back(span_us, o.points);
    replay_options ro;
    ro.observer = &watches.back();
    results.push_back(replay(t, *resource, ro));
    results.back().policy = policy;  // with its settings, as given
  }

  // The live series: from the policy that failed least (failed allocations hold no bytes).
  std::size_t base = 0;
  for (std::size_t p = 1; p < results.size(); ++p)
    if (results[p].failed_allocations < results[base].failed_allocations) base = p;

  nlohmann::json series;
  if (!watches.empty()) {
    const envelope& live = watches[base].live;
    series["start_seconds"] = 0.0;
    series["bucket_seconds"] = static_cast<double>(span_us) * 1e-6 / static_cast<double>(live.buckets());
    series["buckets"] = live.buckets();
    series["live"] = {{"from", results[base].policy}, {"high", delta_encode(live.highs())}};
    series["reserved"] = nlohmann::json::array();
    for (std::size_t p = 0; p < watches.size(); ++p)
      series["reserved"].push_back({{"policy", results[p].policy}, {"high", delta_encode(watches[p].reserved.highs())}});
  }

  // The moments: peaks, first failures, the times asked for, and evenly spaced ones.
  std::map<std::size_t, std::vector<std::string>> moments;
  if (program_rows > 0) {
    moments[watches[base].peak_live_row].push_back("peak live");
    for (std::size_t p = 0; p < watches.size(); ++p) {
      moments[watches[p].peak_reserved_row].push_back("peak reserved under " + results[p].policy);
      if (watches[p].first_failure_row != none)
        moments[watches[p].first_failure_row].push_back("first failure under " + results[p].policy);
    }
    for (const double s : o.at_seconds) {
      // The time as asked, in seconds: format_duration's three decimals would call 20 us "0.000 s". A time
      // past the trace's end is drawn at its last row, and the label says so rather than claim a time the
      // trace never reached (its rows are whole microseconds: half of one is rounding, not past the end).
      std::string label = fmt::format("at {} s", s);
      if (s * 1e6 > static_cast<double>(span_us) + 0.5) label += " (after the trace's end: its last row)";
      auto& labels = moments[program_row_at(t, s)];
      if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(std::move(label));
    }
    for (std::size_t k = 1; k <= o.moments; ++k)
      moments[program_row_at(t, static_cast<double>(span_us) * 1e-6 * static_cast<double>(k) /
                                    static_cast<double>(o.moments))];  // no label: its time says it
  }
  std::vector<std::size_t> rows;
  for (const auto& [row, labels] : moments) rows.push_back(row);

  // One scale for every state of the trace: the widest any policy held.
  std::size_t widest = 0;
  for (const auto& r : results) widest = std::max({widest, r.peak_reserved_bytes, r.peak_device_used_bytes});
  const std::size_t unit = cell_unit(widest, o.map_cells);

  // Pass two: the states at those rows.
  std::vector<std::vector<nlohmann::json>> states;  // [policy][moment]
  for (const auto& policy : o.policies) {
    say(fmt::format("{}: drawing {} moments under {}", t.name, rows.size(), policy));
    sim_device dev(o.device);
    auto resource = make_resource(policy, dev);
    state_watch watch(dev, rows, unit);
    replay_options ro;
    ro.observer = &watch;
    replay(t, *resource, ro);
    states.push_back(std::move(watch.states));
  }
  nlohmann::json moment_list = nlohmann::json::array();
  std::size_t m = 0;
  for (const auto& [row, labels] : moments) {
    nlohmann::json entry = {{"row", row}, {"seconds", static_cast<double>(t.events[row].time_us - t0) * 1e-6},
                            {"labels", labels}, {"states", nlohmann::json::array()}};
    for (std::size_t p = 0; p < results.size(); ++p) {
      nlohmann::json st = states[p][m].is_null() ? nlohmann::json::object() : std::move(states[p][m]);
      st["policy"] = results[p].policy;
      st["failed_before"] = watches[p].first_failure_row != none && watches[p].first_failure_row <= row;
      entry["states"].push_back(std::move(st));
    }
    moment_list.push_back(std::move(entry));
    ++m;
  }

  // A sentence for each first failure.
  nlohmann::json failures = nlohmann::json::array();
  for (std::size_t p = 0; p < watches.size(); ++p) {
    const std::size_t row = watches[p].first_failure_row;
    if (row == none) continue;
    const auto at = std::find(rows.begin(), rows.end(), row) - rows.begin();
    const nlohmann::json& entry = moment_list[static_cast<std::size_t>(at)];
    nlohmann::json f = {{"policy", results[p].policy},
                        {"row", row},
                        {"seconds", static_cast<double>(watches[p].first_failure_us) * 1e-6},
                        {"request_bytes", watches[p].first_failure_request},
                        {"failed_allocations", results[p].failed_allocations}};
    std::vector<nlohmann::json> others;
    for (std::size_t q = 0; q < results.size(); ++q)
      if (q != p) others.push_back(entry["states"][q]);
    f["sentence"] = failure_sentence(f, entry["states"][p], others);
    failures.push_back(std::move(f));
  }

  // fit per policy.
  std::vector<std::optional<std::size_t>> fits;
  if (o.fit) {
    for (const auto& policy : o.policies) {
      fit_options fo;
      fo.device = o.device;
      fo.progress = [&](int probe, std::size_t capacity, bool ok) {
        say(fmt::format("{}: fit under {}: probe {} on {} MiB: {}", t.name, policy, probe, capacity / MiB,
                        ok ? "fits" : "fails"));
      };
      fits.push_back(fit(t, policy, fo).fit_bytes);
    }
  }
  nlohmann::json result_list = nlohmann::json::array();
  for (std::size_t p = 0; p < results.size(); ++p) {
    auto j = to_json(results[p]);
    if (o.fit) j["fit_bytes"] = fits[p] ? nlohmann::json(*fits[p]) : nlohmann::json(nullptr);
    result_list.push_back(std::move(j));
  }

  // vram over its settings.
  nlohmann::json curve = nlohmann::json::array();
  if (o.curve && program_rows > 0) {
    for (const auto& setting : curve_settings()) {
      const std::string spec = setting.empty() ? "vram" : "vram:" + setting;
      say(fmt::format("{}: trade-off curve: {}", t.name, spec));
      sim_device dev(o.device);
      auto resource = make_resource(spec, dev);
      const replay_result r = replay(t, *resource);
      curve.push_back({{"setting", setting.empty() ? "defaults" : setting},
                       {"default", setting.empty()},
                       {"reserved_over_live", r.reserved_over_live},
                       {"driver_share", r.trace_seconds > 0 ? r.modelled_driver_seconds / r.trace_seconds : 0.0},
                       {"driver_calls", r.device_calls.total_calls()},
                       {"failed_allocations", r.failed_allocations}});
    }
  }

  return {{"name", t.name},
          {"events", t.events.size()},
          {"program_rows", program_rows},
          {"seconds", t.seconds()},
          {"notes", t.notes},
          {"results", std::move(result_list)},
          {"table", format_replay_table(results, o.fit ? fits : std::vector<std::optional<std::size_t>>{})},
          {"series", std::move(series)},
          {"cell_bytes", unit},
          {"moments", std::move(moment_list)},
          {"failures", std::move(failures)},
          {"curve", std::move(curve)}};
}

}  // namespace vram
