// `vram bench [--device D] [--sizes LIST] [--threads LIST] [--seconds S] [--pairs N] [--repeat R] [--json]
// [--json-file PATH]`: how fast
// allocators allocate and free one cached block, from 1 and from several threads, side by side in one run
// (src/vram/measure/bench_suite.hpp): on the simulated device vram's pool against glibc's malloc; on a GPU
// cudaMalloc, cudaMallocAsync, vram's pool and the torch-native emulation. A table for people or --json;
// a progress line on standard error when it is a terminal. --json-file also writes the JSON object to a file,
// so one run gives both.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "vram/measure/bench_report.hpp"
#include "vram/measure/bench_suite.hpp"
#include "vram/cli/commands.hpp"
#include "vram/cli/progress.hpp"
#include "vram/core/error.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/trace/file_io.hpp"

namespace vram::cli {

namespace {

struct bench_args {
  std::string device = "auto";
  std::string sizes;
  std::string threads;
  double seconds = 0.2;
  std::uint64_t pairs = 0;
  unsigned repeat = 0;
  bool json = false;
  std::string json_file;
};

/// @brief The command line as typed (from /proc/self/cmdline), or one rebuilt from the arguments.
std::string command_line(const bench_args& a) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!raw.empty()) {
    std::string out;
    for (char c : raw) out += c == '\0' ? ' ' : c;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
  }
  std::string out = "vram bench --device " + a.device;
  if (!a.sizes.empty()) out += " --sizes " + a.sizes;
  if (!a.threads.empty()) out += " --threads " + a.threads;
  out += fmt::format(" --seconds {}", a.seconds);
  if (a.pairs != 0) out += fmt::format(" --pairs {}", a.pairs);
  if (a.repeat != 0) out += fmt::format(" --repeat {}", a.repeat);
  if (a.json) out += " --json";
  if (!a.json_file.empty()) out += " --json-file " + a.json_file;
  return out;
}

void run_bench_command(const bench_args& a) {
  measure::bench_options o;
  if (!a.sizes.empty()) o.sizes = measure::parse_size_list(a.sizes);
  if (!a.threads.empty()) o.threads = measure::parse_thread_list(a.threads);
  o.seconds = a.seconds;
  o.pairs = a.pairs;
  o.repeat = a.repeat;
  o.check();  // before opening a GPU

  const device_choice choice = open_device(parse_device_spec(a.device));
  // The table ends with the note among its own; JSON on standard output carries it too, and the terminal
  // hears of it here.
  if (!choice.note.empty() && a.json) std::cerr << choice.note << '\n';
  const measure::bench_plan plan = measure::plan_for(*choice.dev, o);
  // Checked before the run, so a bad path costs no run; written after it, so a refused plan or a failed run
  // leaves the file that was there.
  if (!a.json_file.empty()) detail::check_writable(a.json_file);

  progress_line progress;
  measure::bench_result r = measure::run_bench(*choice.dev, plan, [&](std::size_t done, std::size_t total, const std::string& cell) {
    progress.show(fmt::format("bench: cell {}/{}: {}", done + 1, total, cell));
  });
  progress.clear();
  r.command = command_line(a);
  if (!choice.note.empty()) r.notes.insert(r.notes.begin(), choice.note);

  const std::string json = a.json || !a.json_file.empty() ? measure::to_json(r).dump(2) + '\n' : std::string();
  // Printed first: a file that cannot be written after all (a full disk) loses no measurement.
  if (a.json) {
    std::cout << json;
  } else {
    std::cout << measure::format_table(r);
  }
  std::cout.flush();
  if (!a.json_file.empty()) detail::write_file_bytes(a.json_file, json);
  if (!r.rows.empty() && std::all_of(r.rows.begin(), r.rows.end(), [](const auto& row) { return !row.error.empty(); }))
    throw error("bench: every cell failed (their errors are above)");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<bench_args>();
  auto* cmd = app.add_subcommand("bench", "Measure allocate+free of one cached block per thread: vram against the "
                                          "host's or the driver's allocators");
  cmd->add_option("--device,-d", a->device, device_help)->capture_default_str();
  cmd->add_option("--sizes", a->sizes,
                  "Block sizes, comma-separated, e.g. 512,4K,64K,1M (default sim: 512 B to 64 MiB; GPU: to 1 GiB)")
      ->check(given_a_value);
  cmd->add_option("--threads", a->threads, "Thread counts, comma-separated (default sim: 1,2; GPU: 1,4,16)")
      ->check(given_a_value);
  cmd->add_option("--seconds", a->seconds, "Time per cell, after warm-up")->capture_default_str();
  cmd->add_option("--pairs", a->pairs, "Also stop a thread after this many pairs per cell (0: time alone)")
      ->check(whole_number)
      ->capture_default_str();
  auto* repeat = cmd->add_option("--repeat", a->repeat,
                                 fmt::format("Runs of every cell, in turn, the median kept, 1 to {} (default sim: 3; "
                                             "GPU: 1)", measure::max_repeat));
  cmd->add_flag("--json", a->json, "Print a JSON object");
  cmd->add_option("--json-file", a->json_file, "Also write the JSON object to this file")->check(given_a_value);
  cmd->callback([a, repeat] {
    if (repeat->count() > 0 && a->repeat == 0)
      throw usage_error(fmt::format("bad --repeat 0: from 1 to {}", measure::max_repeat));
    run_bench_command(*a);
  });
}

}  // namespace vram::cli
