// The `vram` command-line tool: replay, fit, simulate, convert, demo. Errors print one line naming the
// problem and exit non-zero: 1 for bad input or a failed run, 2 for bad arguments, 3 when a replay saw
// allocations fail or a fit found no device the trace fits on.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "vram/cli/commands.hpp"
#include "vram/core/error.hpp"
#include "vram/policies/registry.hpp"
#include "vram/pool/pool_options.hpp"

namespace {

constexpr const char* version_text = "vram " VRAM_VERSION;

constexpr const char* exit_status_text =
    "\nExit status: 0 done, 1 bad input or a failed run, 2 bad arguments, 3 a replay saw allocations fail "
    "(fit: a trace fits on no device tried).";

/// The policies, a line each, for the end of --help (of vram, and of the commands that take --policy).
std::string policy_footer() {
  std::string s = "\nPolicies (--policy NAME[:settings], comma-separated, or 'all'):\n";
  for (const auto& p : vram::policies()) s += "  " + std::string(p.name) + std::string(18 - p.name.size(), ' ') +
                                             std::string(p.summary) + "\n";
  return s + exit_status_text;
}

}  // namespace

// What a command printed must have reached its output: a full disk, a file-size limit or a closed device
// turns the exit status to 1, with the reason, rather than leave a cut-off table or JSON behind a success.
int with_output_written(int status) {
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return status;
  std::fprintf(stderr, "vram: cannot write the output: %s\n",
               errno != 0 ? std::strerror(errno) : "a write failed, the output is cut short");
  return 1;
}

int main(int argc, char** argv) {
  CLI::App app{"vram: a GPU device-memory manager, and the tools to see and measure GPU memory"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text);
  app.footer(policy_footer());
  vram::cli::add_replay_command(app);
  vram::cli::add_fit_command(app);
  vram::cli::add_simulate_command(app);
  vram::cli::add_convert_command(app);
  vram::cli::add_demo_command(app);
  vram::cli::add_check_command(app);
  vram::cli::add_info_command(app);
  vram::cli::add_probe_command(app);
  vram::cli::add_soak_command(app);
  vram::cli::add_bench_command(app);
  vram::cli::add_record_command(app);
  vram::cli::add_report_command(app);
  app.add_subcommand("version", "Print vram's version")->callback([] { std::printf("%s\n", version_text); });
  for (auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    // A command inherits the app's footer; one with an exit status of its own (record) has set another.
    if (sub->get_footer() == app.get_footer())
      sub->footer(sub->get_option_no_throw("--policy") != nullptr ? policy_footer() : std::string(exit_status_text));
    // An option given empty ("--hours ''") is refused, rather than read as 0 or taken for absent.
    for (CLI::Option* o : sub->get_options())
      if (!o->get_positional() && o->get_expected_max() > 0) o->check(vram::cli::given_a_value);
  }
  // A first word that is no option and no command: say so, rather than CLI11's "A subcommand is required".
  const auto commands = app.get_subcommands([](const CLI::App*) { return true; });
  const auto is_command = [&](const char* word) {
    for (const auto* sub : commands)
      if (sub->get_name() == word) return true;
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::string known;
    for (const auto* sub : commands) known += (known.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "vram: unknown command '%s'; the commands: %s (vram --help)\n", argv[1], known.c_str());
    return 2;
  }
  // The pool's environment variables set the vram policy's starting settings here too (docs/pool.md): say so
  // where a command replays it, since its rows are still named plain "vram".
  if (argc > 1) {
    const std::string command = argv[1];
    const auto set = vram::pool_options::environment_settings();
    if (!set.empty() && (command == "replay" || command == "fit" || command == "report" || command == "demo" ||
                         command == "soak" || command == "bench")) {
      std::string list;
      for (const auto& s : set) list += (list.empty() ? "" : " ") + s;
      std::fprintf(stderr, "note: the environment sets the vram pool's settings: %s (a --policy vram:NAME=VALUE "
                           "setting overrides one)\n", list.c_str());
    }
  }
  std::vector<std::string> args = vram::cli::with_record_separator(app, argc, argv);
  std::vector<char*> arg_pointers;
  for (auto& a : args) arg_pointers.push_back(a.data());
  try {
    app.parse(static_cast<int>(arg_pointers.size()), arg_pointers.data());
  } catch (const CLI::ExtrasError& e) {
    // CLI11 lists the extra arguments last first; name them as they were typed.
    std::string command, extras, before;
    std::vector<std::string> rest;
    for (const auto* sub : app.get_subcommands()) {
      command = " " + sub->get_name();
      rest = sub->remaining();
    }
    for (const auto& a : rest) extras += (extras.empty() ? "" : " ") + a;
    // Arguments before the command ("vram --json info") are the app's own extras.
    for (const auto& a : app.remaining()) before += (before.empty() ? "" : " ") + a;
    if (!before.empty() && !command.empty()) {
      std::fprintf(stderr, "vram: arguments not expected before the command: %s (a command's options go after it: "
                           "vram%s --help)\n", before.c_str(), command.c_str());
      return 2;
    }
    if (extras.empty()) extras = before;
    std::fprintf(stderr, "vram: arguments not expected: %s (vram%s --help)\n", extras.empty() ? e.what() : extras.c_str(),
                 command.c_str());
    return 2;
  } catch (const CLI::ParseError& e) {
    // Help and --version are CLI11's to print. Any other parse error is a bad argument: one line, as every
    // error here, naming the command whose --help lists the options, and the 2 of every bad argument.
    if (e.get_exit_code() == 0) return with_output_written(app.exit(e));
    std::string command;
    for (const auto* sub : app.get_subcommands()) command = " " + sub->get_name();
    std::fprintf(stderr, "vram: %s (vram%s --help)\n", e.what(), command.c_str());
    return 2;
  } catch (const vram::usage_error& e) {
    std::fprintf(stderr, "vram: %s\n", e.what());
    return 2;
  } catch (const vram::error& e) {
    std::fprintf(stderr, "vram: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vram: unexpected error: %s\n", e.what());
    return 1;
  }
  return with_output_written(vram::cli::finished_status);
}
