// `vram record [-o FILE] -- COMMAND [ARGS...]`: runs an unmodified CUDA program with vram's recorder
// (libvram_record.so, src/vram/integrations/cupti_recorder.cpp) injected by the CUDA driver, then says what
// it recorded. The recording holds the program's device-memory calls at the driver level, whoever made them:
// for PyTorch, its caching allocator's segments, not its tensors (docs/own-workload.md).
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/replay/replay.hpp"
#include "vram/report/table.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/trace/trace_recorder.hpp"

extern char** environ;

namespace vram::cli {

namespace {

namespace fs = std::filesystem;

struct record_args {
  std::string output = "run.vram";
  std::string library;
  std::vector<std::string> command;
  bool json = false;
};

// libvram_record.so: --library, then VRAM_RECORD_LIBRARY, then beside this tool, then in ../lib (an install).
fs::path find_recorder(const std::string& asked) {
  if (!asked.empty()) {
    if (!fs::exists(asked)) throw usage_error(fmt::format("--library {}: no such file", asked));
    return fs::absolute(asked);
  }
  if (const char* env = std::getenv("VRAM_RECORD_LIBRARY"); env != nullptr && *env != '\0') {
    if (!fs::exists(env)) throw usage_error(fmt::format("VRAM_RECORD_LIBRARY={}: no such file", env));
    return fs::absolute(env);
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  for (const fs::path& p : {self.parent_path() / "libvram_record.so", self.parent_path() / ".." / "lib" / "libvram_record.so"})
    if (!ec && fs::exists(p)) return fs::canonical(p);
  throw error(fmt::format(
      "vram record needs its recorder, libvram_record.so, which is built where CUDA's CUPTI is installed (cupti.h "
      "and libcupti): none beside {} or in its ../lib; set --library or VRAM_RECORD_LIBRARY",
      self.parent_path().string()));
}

// Runs the command with the recorder injected; returns its exit status as a shell gives it.
int run_child(const std::vector<std::string>& command, const fs::path& recorder, const fs::path& output) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    if (kv.rfind("CUDA_INJECTION64_PATH=", 0) == 0 || kv.rfind("VRAM_RECORD_OUTPUT=", 0) == 0 ||
        kv.rfind("VRAM_RECORD_PARENT=", 0) == 0)
      continue;
    env_strings.emplace_back(kv);
  }
  env_strings.push_back("CUDA_INJECTION64_PATH=" + recorder.string());
  env_strings.push_back("VRAM_RECORD_OUTPUT=" + output.string());
  // The child's pid is known only once it runs: the recorder compares its parent's pid with this one.
  env_strings.push_back(fmt::format("VRAM_RECORD_PARENT={}", ::getpid()));
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = command;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()); rc != 0)
    throw error(fmt::format("cannot run '{}': {}", command.front(), std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw error(fmt::format("waiting for '{}': {}", command.front(), std::strerror(errno)));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// The files a recording wrote: OUTPUT for device 0, OUTPUT with ".devN" for the others.
std::vector<fs::path> recorded_files(const fs::path& output) {
  std::vector<fs::path> files;
  for (int d = 0; d < 64; ++d) {
    const fs::path p = device_recording_path(output.string(), d);
    if (fs::exists(p)) files.push_back(p);
  }
  return files;
}

void run_record(const record_args& a) {
  if (a.command.empty()) throw usage_error("vram record needs a command to run: vram record -o run.vram -- ./app args");
  const fs::path recorder = find_recorder(a.library);
  const fs::path output = fs::absolute(a.output);
  for (const auto& stale : recorded_files(output)) fs::remove(stale);  // an older run's files would mislead
  const int status = run_child(a.command, recorder, output);
  const auto files = recorded_files(output);
  if (files.empty()) {
    std::cerr << fmt::format(
        "vram record: '{}' {} and wrote no recording: it made no device-memory call, or CUDA did not load the "
        "recorder (a program that never initializes CUDA; a CUDA older than CUPTI's memory records)\n",
        a.command.front(), status == 0 ? "ran" : fmt::format("exited with status {}", status));
    finished_status = status == 0 ? 1 : status;
    return;
  }
  text_table table({"file", "events", "allocs", "peak live", "peak mapped", "span"});
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : files) {
    const trace t = read_trace(f.string());
    std::uint64_t allocs = 0, live = 0, peak = 0;
    std::unordered_map<std::uint64_t, std::uint64_t> sizes;
    for (const auto& e : t.events) {
      if (e.action == trace_action::alloc) {
        ++allocs;
        sizes[e.addr] = e.size;
        live += e.size;
        peak = std::max(peak, live);
      } else if (e.action == trace_action::free_requested) {
        if (const auto it = sizes.find(e.addr); it != sizes.end()) {
          live -= it->second;
          sizes.erase(it);
        }
      }
    }
    const auto mapped = recorded_peak_reserved(t);
    table.add_row({f.filename().string(), fmt::format("{}", t.events.size()), fmt::format("{}", allocs),
                   format_bytes(peak), mapped ? format_bytes(*mapped) : "-", format_duration(t.seconds())});
    out.push_back({{"file", f.string()},
                   {"events", t.events.size()},
                   {"allocations", allocs},
                   {"peak_live_bytes", peak},
                   {"peak_mapped_bytes", mapped ? nlohmann::json(*mapped) : nlohmann::json(nullptr)},
                   {"trace_seconds", t.seconds()},
                   {"command_status", status}});
  }
  if (a.json) {
    std::cout << out.dump(2) << '\n';
  } else {
    std::cout << table.str();
    std::cout << "recorded at the driver: each allocation is what the program asked of CUDA; a program with a "
                 "caching allocator of its own (PyTorch) shows its segments, not its tensors: for those, a PyTorch "
                 "memory snapshot or VRAM_RECORD (docs/own-workload.md). peak mapped: virtual-memory mappings "
                 "(cuMemMap).\n";
  }
  if (status != 0) std::cerr << fmt::format("vram record: '{}' exited with status {}\n", a.command.front(), status);
  finished_status = status;
}

}  // namespace

void add_record_command(CLI::App& app) {
  auto a = std::make_shared<record_args>();
  auto* cmd = app.add_subcommand(
      "record", "Run a CUDA program and record its device-memory calls at the driver: vram record -- ./app args");
  cmd->add_option("-o,--output", a->output, "The recording (vram format); device N > 0 goes to NAME.devN.EXT")
      ->capture_default_str();
  cmd->add_option("--library", a->library, "The recorder, libvram_record.so (default: beside vram, or ../lib)");
  cmd->add_flag("--json", a->json, "Print what was recorded as JSON");
  cmd->add_option("command", a->command, "The program and its arguments, after --");
  cmd->callback([a] { run_record(*a); });
}

}  // namespace vram::cli
