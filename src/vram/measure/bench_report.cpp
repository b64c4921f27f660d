// Table and JSON of a bench result (bench_report.hpp).
// Decisions:
//  - NaN (a failed cell, a missing divisor) is null in JSON and "-" in the table.
//  - The table prints the rows in run order (size, then threads, then allocator), so the allocators of one
//    cell sit together and the ratio column reads down a cell.
#include "vram/measure/bench_report.hpp"

#include <cmath>

#include <fmt/format.h>

namespace vram::measure {

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

std::string fixed3(double v) {
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  return fmt::format("{:.2f}", v);
}

}  // namespace

std::string rate_label(double v) {
  if (!std::isfinite(v)) return "-";
  if (v >= 1e9) return fixed3(v / 1e9) + " G";
  if (v >= 1e6) return fixed3(v / 1e6) + " M";
  if (v >= 1e3) return fixed3(v / 1e3) + " k";
  return fixed3(v);
}

nlohmann::json to_json(const bench_result& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json j = {{"allocator", row.allocator},
                        {"size", row.bytes},
                        {"threads", row.threads},
                        {"pairs", row.pairs},
                        {"seconds", row.seconds},
                        {"ns_per_pair", number(row.ns_per_pair)},
                        {"pairs_per_second", number(row.pairs_per_second)},
                        {"cpu_ns_per_pair", number(row.cpu_ns_per_pair)},
                        {"cpu_share", number(row.cpu_share)},
                        {"ratio", number(row.ratio)},
                        {"ratio_to", r.baseline},
                        {"scaling", number(row.scaling)}};
    if (!row.error.empty()) j["error"] = row.error;
    rows.push_back(std::move(j));
  }
  return {{"device", r.device},
          {"simulated", r.simulated},
          {"date", r.date},
          {"command", r.command},
          {"baseline", r.baseline},
          {"seconds_per_cell", r.seconds},
          {"pairs_per_thread", r.pairs == 0 ? nlohmann::json(nullptr) : nlohmann::json(r.pairs)},
          {"repeat", r.repeat},
          {"sizes", r.sizes},
          {"threads", r.threads},
          {"allocators", r.allocators},
          {"notes", r.notes},
          {"rows", std::move(rows)}};
}

std::string format_table(const bench_result& r) {
  std::string out = fmt::format("vram bench on {}, {}\n", r.device, r.date);
  out += fmt::format("each thread allocates and frees one block, over and over, for {} s per cell{}; threads start together\n",
                     r.seconds, r.pairs == 0 ? "" : fmt::format(" or {} pair{}", r.pairs, r.pairs == 1 ? "" : "s"));
  if (r.repeat > 1) {
    out += fmt::format("every cell ran {} times, in turn with the others; each row is its run with the median pairs/s\n",
                       r.repeat);
  }
  out += fmt::format("ns/pair: per thread, wall clock; pairs/s: all threads; ratio: pairs/s over {}'s in the same "
                     "cell; scaling: pairs/s over 1 thread's;\ncpu ns/pair: per thread, CPU time; cpu: the share of "
                     "the time the threads were on a CPU\n\n", r.baseline);
  const std::string header = fmt::format("{:>8}  {:>7}  {:<16}  {:>10}  {:>9}  {:>8}  {:>7}  {:>11}  {:>4}\n", "size",
                                         "threads", "allocator", "ns/pair", "pairs/s", "ratio", "scaling",
                                         "cpu ns/pair", "cpu");
  out += header;
  std::size_t last_bytes = 0;
  unsigned last_threads = 0;
  bool first = true;
  std::vector<std::string> errors;
  for (const auto& row : r.rows) {
    if (!first && (row.bytes != last_bytes || row.threads != last_threads) && r.allocators.size() > 2) out += '\n';
    first = false;
    last_bytes = row.bytes;
    last_threads = row.threads;
    auto ratio = [](double v) { return std::isfinite(v) ? fmt::format("{:.2f}x", v) : std::string("-"); };
    const std::string ns = std::isfinite(row.ns_per_pair) ? fmt::format("{:.1f}", row.ns_per_pair) : "failed";
    const std::string cpu_ns = std::isfinite(row.cpu_ns_per_pair) ? fmt::format("{:.1f}", row.cpu_ns_per_pair) : "-";
    const std::string share = std::isfinite(row.cpu_share) ? fmt::format("{:.0f}%", 100 * row.cpu_share) : "-";
    out += fmt::format("{:>8}  {:>7}  {:<16}  {:>10}  {:>9}  {:>8}  {:>7}  {:>11}  {:>4}\n", size_label(row.bytes),
                       row.threads, row.allocator, ns, rate_label(row.pairs_per_second), ratio(row.ratio),
                       ratio(row.scaling), cpu_ns, share);
    if (!row.error.empty()) {
      errors.push_back(fmt::format("{} {} x {}: {}", row.allocator, size_label(row.bytes), row.threads, row.error));
    }
  }
  if (!r.notes.empty() || !errors.empty()) out += '\n';
  for (const auto& n : r.notes) out += "note: " + n + '\n';
  for (const auto& e : errors) out += "failed: " + e + '\n';
  return out;
}

}  // namespace vram::measure
