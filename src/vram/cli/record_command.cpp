// `vram record [-o FILE] -- COMMAND [ARGS...]`: runs an unmodified CUDA program with vram's recorder
// (libvram_record.so, src/vram/integrations/cupti_recorder.cpp) injected by the CUDA driver, then says what
// it recorded. The recording holds the program's device-memory calls at the driver level, whoever made them:
// for PyTorch, its caching allocator's segments, not its tensors (docs/own-workload.md).
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <tuple>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "vram/cli/commands.hpp"
#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/cuda_driver.hpp"
#include "vram/replay/replay.hpp"
#include "vram/report/table.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/trace/trace_recorder.hpp"
#include "vram/trace/vram_format.hpp"

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

// The program while it runs, for the signals passed on to it; the signal that ended it, if one did.
volatile sig_atomic_t child_running = 0;
int child_signal = 0;

extern "C" void forward_to_child(int sig) {
  if (child_running > 0) ::kill(static_cast<pid_t>(child_running), sig);
}

// A program that could not be started, with the status a shell gives that (127: not found, 126: not runnable).
class cannot_run : public error {
 public:
  cannot_run(const std::string& what, int status) : error(what), status(status) {}
  int status;
};

// The signals vram record passes on to the program or ignores while it runs (run_child), and holds back from
// the program's end until its recording is said.
constexpr std::array<int, 4> held_signals{SIGINT, SIGQUIT, SIGTERM, SIGHUP};

// Lets the signals held since the program's end through.
void let_held_signals_through() {
  sigset_t held;
  sigemptyset(&held);
  for (const int sig : held_signals) sigaddset(&held, sig);
  sigprocmask(SIG_UNBLOCK, &held, nullptr);
}

// Runs the command with the recorder injected; returns its exit status as a shell gives it. Returns with
// SIGINT, SIGQUIT, SIGTERM and SIGHUP blocked (let_held_signals_through). @throws cannot_run.
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
  // As a shell does for the program it waits on, and more: SIGINT and SIGQUIT, which a terminal sends to the
  // whole foreground group (the program too), are ignored while vram record waits; SIGTERM and SIGHUP, sent to
  // vram record alone (kill, timeout, a closed terminal), go on to the program. Either way vram record lives
  // to put what was recorded in its place. The program gets each signal as vram record got it: one ignored
  // stays ignored.
  const auto& signals = held_signals;
  std::array<struct sigaction, 4> old{};
  sigset_t defaults;
  sigemptyset(&defaults);
  struct sigaction ignore {}, forward {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  forward.sa_handler = forward_to_child;
  sigemptyset(&forward.sa_mask);
  for (std::size_t i = 0; i < signals.size(); ++i) {
    sigaction(signals[i], nullptr, &old[i]);
    if (old[i].sa_handler == SIG_IGN) continue;
    sigaddset(&defaults, signals[i]);
    sigaction(signals[i], i < 2 ? &ignore : &forward, nullptr);
  }
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  struct restore_signals {
    const std::array<int, 4>& which;
    const std::array<struct sigaction, 4>& old;
    posix_spawnattr_t& a;
    ~restore_signals() {
      child_running = 0;
      for (std::size_t i = 0; i < which.size(); ++i) sigaction(which[i], &old[i], nullptr);
      posix_spawnattr_destroy(&a);
    }
  } restore{signals, old, attr};
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), envp.data());
  if (rc == ENOEXEC) {
    // A script without "#!": run by the shell, as a shell itself would run it.
    std::vector<char*> with_sh{const_cast<char*>("/bin/sh")};
    with_sh.insert(with_sh.end(), argv.begin(), argv.end());
    rc = posix_spawn(&pid, "/bin/sh", nullptr, &attr, with_sh.data(), envp.data());
  }
  if (rc != 0) throw cannot_run(fmt::format("cannot run '{}': {}", command.front(), std::strerror(rc)), rc == ENOENT ? 127 : 126);
  child_running = pid;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw error(fmt::format("waiting for '{}': {}", command.front(), std::strerror(errno)));
  }
  // The program has ended: from here until its recording is in place and said, the signals it shared wait
  // (run_record lets them through at its end), so a SIGTERM that timeout sends the whole group does not end
  // vram record halfway through.
  sigset_t held;
  sigemptyset(&held);
  for (const int sig : signals) sigaddset(&held, sig);
  sigprocmask(SIG_BLOCK, &held, nullptr);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    child_signal = WTERMSIG(status);
    return 128 + WTERMSIG(status);
  }
  return 1;
}

// How the program ended, in words: "ran", "exited with status 4", "was killed by signal 11 (Segmentation fault)".
std::string how_it_ended(int status) {
  if (child_signal != 0 && status == 128 + child_signal)
    return fmt::format("was killed by signal {} ({})", child_signal, ::strsignal(child_signal));
  return status == 0 ? "ran" : fmt::format("exited with status {}", status);
}

// Why the program cannot be run, or "" when it can: as a shell finds it (a name with a slash as it is, else on
// PATH). @p status is a shell's for it: 127 where there is no such program, 126 where it may not be run.
std::string why_not_runnable(const std::string& program, int& status) {
  if (program.empty()) {
    status = 127;
    return "no program of that name";
  }
  auto runnable = [](const fs::path& p) { return fs::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0; };
  if (program.find('/') != std::string::npos) {
    if (runnable(program)) return {};
    status = fs::exists(program) ? 126 : 127;
    return status == 126 ? "it is not a program this user may run" : "no such file";
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  bool found = false;
  for (std::size_t at = 0; at <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', at), dirs.size());
    const fs::path candidate = fs::path(end == at ? "." : std::string(dirs.substr(at, end - at))) / program;
    if (runnable(candidate)) return {};
    found = found || fs::exists(candidate);
    at = end + 1;
  }
  status = found ? 126 : 127;
  return found ? "it is not a program this user may run" : "not found on PATH";
}

constexpr int most_devices = 64;

// Where the ".pidN" that names the file of a process the program started begins in @p name; npos for none.
std::size_t pid_suffix_at(const std::string& name) {
  const auto dot = name.rfind(".pid");
  const bool digits = dot != std::string::npos && dot + 4 < name.size() && name[dot + 4] != '0' &&
                      name.find_first_not_of("0123456789", dot + 4) == std::string::npos;
  return digits ? dot : std::string::npos;
}

// Whether @p name is one of the files a run writes for an output named @p output_name: the output and its
// devices' (".devN"), and those of processes the program started (each with ".pidN" after them).
bool of_a_run(const std::string& name, const std::string& output_name) {
  const std::string without_pid = name.substr(0, pid_suffix_at(name));
  for (int d = 0; d < most_devices; ++d)
    if (without_pid == device_recording_path(output_name, d)) return true;
  return false;
}

// The order a run's files are listed in: the program's own (device 0 first), then each process it started.
bool listed_before(const fs::path& a, const fs::path& b) {
  auto key = [](const fs::path& p) {
    const std::string n = p.filename().string();
    const std::size_t pid = pid_suffix_at(n);
    return std::make_tuple(pid != std::string::npos, pid != std::string::npos ? n.substr(pid) : std::string(),
                           n.size(), n);
  };
  return key(a) < key(b);
}

// What a recorded file holds (@p f, to be put in place as @p named), as its row and its JSON.
struct described {
  std::vector<std::string> row;
  nlohmann::json json;
};

// @throws input_error when the file is no trace.
described describe(const fs::path& f, const fs::path& named, int status) {
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
  return {{named.filename().string(), fmt::format("{}", t.events.size()), fmt::format("{}", allocs),
           format_bytes(peak), mapped ? format_bytes(*mapped) : "-", format_duration(t.seconds())},
          {{"file", named.string()},
           {"events", t.events.size()},
           {"allocations", allocs},
           {"peak_live_bytes", peak},
           {"peak_mapped_bytes", mapped ? nlohmann::json(*mapped) : nlohmann::json(nullptr)},
           {"trace_seconds", t.seconds()},
           {"command_status", status}}};
}

// Whether @p p is a trace in vram's format (its magic first bytes): only such a file of the run before is
// removed, never a file of the user's own that happens to be named like one.
bool is_vram_trace(const fs::path& p) {
  try {
    detail::input_file in(p.string());
    std::string head(detail::vram_magic.size(), '\0');
    return in.read(head.data(), head.size()) == head.size() && head == detail::vram_magic;
  } catch (const error&) {
    return false;
  }
}

// A run's files, in the staging folder: each described from what the recorder wrote there, then written to
// its name beside the output by the rules of every trace vram writes (a link is written through; a file the
// user may not write is refused), and only then listed (@p table, @p out). Then every trace of the run before
// that this run did not write goes (an older run's .dev1 would be taken for this run's), but for those this
// run recorded and could not put in place. What goes wrong with one file is said, and the others go on: a
// file that cannot be put in place stays in the staging folder, which is then kept.
struct placed {
  std::vector<fs::path> files;  // in place, in listing order
  std::vector<std::string> problems;
};

placed put_in_place(const fs::path& staging, const fs::path& output, int status, text_table& table,
                    nlohmann::json& out) {
  placed r;
  std::vector<fs::path> staged;
  for (const auto& entry : fs::directory_iterator(staging)) staged.push_back(entry.path());
  std::sort(staged.begin(), staged.end(), listed_before);
  const fs::path folder = output.parent_path();
  std::vector<fs::path> kept;  // names this run recorded but could not put in place
  for (const auto& from : staged) {
    const fs::path to = folder / from.filename();
    try {
      const described d = describe(from, to, status);
      detail::write_file_bytes(to.string(), detail::read_file_bytes(from.string()));
      fs::remove(from);
      table.add_row(d.row);
      out.push_back(d.json);
      r.files.push_back(to);
    } catch (const error& e) {
      r.problems.push_back(fmt::format("{} (the recording is kept in {})", e.what(), from.string()));
      kept.push_back(to);
    }
  }
  std::error_code ec;
  fs::remove(staging, ec);  // empty unless a file could not be put in place
  if (staged.empty()) return r;  // nothing recorded: the run before's files stay as they were
  const std::string output_name = output.filename().string();
  for (const auto& entry : fs::directory_iterator(folder)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_symlink() && entry.is_regular_file() && of_a_run(name, output_name) &&
        std::find(r.files.begin(), r.files.end(), entry.path()) == r.files.end() &&
        std::find(kept.begin(), kept.end(), entry.path()) == kept.end() && is_vram_trace(entry.path())) {
      if (!fs::remove(entry.path(), ec) && ec)
        r.problems.push_back(fmt::format("{}, of the run before, cannot be removed: {}", entry.path().string(),
                                         ec.message()));
    }
  }
  return r;
}

// A program that Ctrl-C ended: vram record, its recording in place, ends by the same signal, so that a shell
// loop around it stops as it would around the program.
void end_as_the_program_did() {
  if (child_signal != SIGINT) return;
  std::cout.flush();
  std::cerr.flush();
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
}

void run_record(const record_args& a) {
  if (a.command.empty()) throw usage_error("vram record needs a command to run: vram record -o run.vram -- ./app args");
  if (const std::string why = recording_name_problem(a.output); !why.empty()) throw usage_error("-o " + why);
  const fs::path recorder = find_recorder(a.library);
  const fs::path output = fs::absolute(a.output);
  // Said before the run: the output must take the recording (as every trace vram writes), and the recording is
  // made in a folder beside it, so its folder must take new files too.
  detail::check_writable(output.string());
  const fs::path folder = output.parent_path();
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw error(fmt::format("{}: cannot create: {} is not a folder this user may write to", output.string(),
                            folder.string()));
  struct let_through_at_end {
    ~let_through_at_end() { let_held_signals_through(); }
  } at_end;
  auto nothing = [&](int status) {
    if (a.json) std::cout << "[]\n";
    finished_status = status;
  };
  int status = 0;
  if (const std::string why = why_not_runnable(a.command.front(), status); !why.empty()) {
    std::cerr << fmt::format("vram: cannot run '{}': {}\n", a.command.front(), why);
    return nothing(status);
  }
  std::string why;
  if (!cuda_available(&why)) {
    std::cerr << fmt::format("vram record: no CUDA device here ({}): '{}' runs, but CUDA will not load the "
                             "recorder, so it is unlikely to record anything\n",
                             why, a.command.front());
  }
  // The run records into a folder of its own beside the output, under the output's own name (processes the
  // program starts, under that name with .pidN; other devices, with .devN, as beside the output); the output's
  // files are replaced only once there is a recording, so a run that records nothing leaves the last one as
  // it was.
  const fs::path staging = folder / fmt::format(".vram-record-{}", ::getpid());
  fs::remove_all(staging);
  fs::create_directory(staging);
  try {
    status = run_child(a.command, recorder, staging / output.filename());
  } catch (const cannot_run& e) {
    fs::remove_all(staging);
    std::cerr << "vram: " << e.what() << '\n';
    return nothing(e.status);
  }
  text_table table({"file", "events", "allocs", "peak live", "peak mapped", "span"});
  nlohmann::json out = nlohmann::json::array();
  const placed p = put_in_place(staging, output, status, table, out);
  for (const auto& problem : p.problems) std::cerr << "vram record: " << problem << '\n';
  if (p.files.empty() && p.problems.empty()) {
    std::cerr << fmt::format(
        "vram record: '{}' {} and wrote no recording: it made no device-memory call, or CUDA did not load the "
        "recorder (no CUDA device; a program that never initializes CUDA; a CUDA older than CUPTI's memory "
        "records){}\n",
        a.command.front(), how_it_ended(status),
        fs::exists(output) ? fmt::format("; {} is as it was", output.string()) : "");
    nothing(status == 0 ? 1 : status);
    end_as_the_program_did();
    return;
  }
  if (a.json) {
    std::cout << out.dump(2) << '\n';
  } else if (!p.files.empty()) {
    std::cout << table.str();
    std::cout << "recorded at the driver: each allocation is what the program asked of CUDA; a program with a "
                 "caching allocator of its own (PyTorch) shows its segments, not its tensors: for those, a PyTorch "
                 "memory snapshot or VRAM_RECORD (docs/own-workload.md). peak mapped: virtual-memory mappings "
                 "(cuMemMap).\n";
  }
  if (status != 0) std::cerr << fmt::format("vram record: '{}' {}\n", a.command.front(), how_it_ended(status));
  finished_status = status != 0 ? status : p.problems.empty() ? 0 : 1;
  end_as_the_program_did();
}

}  // namespace

std::vector<std::string> with_record_separator(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() < 3 || args[1] != "record") return args;
  const CLI::App* record = app.get_subcommand("record");  // added by add_record_command: throws if not
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.size() > 1 && a[0] == '-') {
      // An option; one that takes a value and was not given it in the same word ("-o x", not "-ox", "--output=x")
      // has it next. An unknown one is CLI11's to refuse.
      const CLI::Option* o = record->get_option_no_throw(a);
      if (o == nullptr && a.find('=') == std::string::npos && !(a.size() > 2 && a[1] != '-' &&
                                                                record->get_option_no_throw(a.substr(0, 2))))
        break;  // unknown: CLI11 refuses it, and no "--" of ours shows in its message
      if (o != nullptr && o->get_expected_max() > 0) ++i;
      continue;
    }
    args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), "--");
    break;
  }
  return args;
}

void add_record_command(CLI::App& app) {
  auto a = std::make_shared<record_args>();
  auto* cmd = app.add_subcommand(
      "record", "Run a CUDA program and record its device-memory calls at the driver: vram record -- ./app args");
  cmd->add_option("-o,--output", a->output, "The recording (vram format); device N > 0 goes to NAME.devN.EXT")
      ->capture_default_str();
  cmd->add_option("--library", a->library, "The recorder, libvram_record.so (default: beside vram, or ../lib)");
  cmd->add_flag("--json", a->json, "Print what was recorded as JSON");
  cmd->add_option("command", a->command, "The program and its arguments, after --");
  cmd->footer("\nExit status: the program's (126: it may not be run; 127: no such program; 128 + N: signal N ended "
              "it); 1 where it exited 0 but nothing was recorded, or the output could not be written; 2 bad arguments.");
  cmd->callback([a] { run_record(*a); });
}

}  // namespace vram::cli
