// The soak report as a table (soak_table.hpp).
#include "vram/report/soak_table.hpp"

#include <fmt/format.h>

#include "vram/core/size.hpp"
#include "vram/report/table.hpp"

namespace vram {

std::string format_soak_table(const soak_report& report) {
  std::string out = fmt::format(
      "soak: {} workload, {} simulated hour{}, seed {}, {} events\n"
      "peak live {}; each policy on a device of {} ({} x peak live, rounded up to 2 MiB)\n\n",
      report.workload, report.hours, report.hours == 1 ? "" : "s", report.seed, report.events, format_bytes(report.peak_live_bytes),
      format_bytes(report.device_bytes), report.headroom);
  text_table table({"policy", "failed", "failures", "first failure", "free then", "peak reserved", "peak/live",
                    "creep", "live creep"},
                   2);  // the policy, and yes or no
  for (const auto& r : report.results) {
    table.add_row({r.policy, r.failed() ? "yes" : "no", fmt::format("{}", r.failed_allocations),
                   r.first_failure_hours ? fmt::format("{:.2f} h", *r.first_failure_hours) : "-",
                   r.free_share_at_first_failure ? fmt::format("{:.2f}%", 100.0 * *r.free_share_at_first_failure)
                                                 : "-",
                   format_bytes(r.peak_reserved_bytes),
                   report.peak_live_bytes == 0
                       ? "-"
                       : fmt::format("{:.3f}", static_cast<double>(r.peak_reserved_bytes) /
                                                   static_cast<double>(report.peak_live_bytes)),
                   fmt::format("{:.3f}", r.creep), fmt::format("{:.3f}", r.live_creep)});
  }
  out += table.str();
  out += fmt::format(
      "creep: peak reserved over the last sixth of the run / over the first sixth; live creep: the same for live "
      "bytes (the traffic's part); free then: the device's free share when the first allocation failed.\n");
  return out;
}

}  // namespace vram
