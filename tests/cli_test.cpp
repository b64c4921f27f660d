// The `vram` tool end to end: bad input gives a message that names the problem and a non-zero exit (1 for
// bad input, 2 for bad arguments), and a replay / fit of a hand-made trace prints the answers worked out here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <iterator>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "vram/core/error.hpp"
#include "vram/core/size.hpp"
#include "vram/device/device_spec.hpp"
#include "vram/policies/registry.hpp"
#include "vram/trace/file_io.hpp"

namespace vram {
namespace {

struct outcome {
  int code;
  std::string out;  // standard output and standard error together
};

outcome run(const std::string& args) {
  const std::string cmd = std::string(VRAM_CLI_PATH) + " " + args + " 2>&1";
  outcome o{-1, {}};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return o;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) o.out += buf.data();
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

struct split_outcome {
  int code;
  std::string out, err;  // standard output; standard error
};

// As run(), with standard error apart (in a file of the process's own beside the test folders).
split_outcome run_split(const std::string& args);

// A folder of the running test's own: ctest runs the tests of this file side by side, and two of them
// writing one file would read each other's half-written traces. The process's folder goes when it ends.
std::filesystem::path process_dir() {
  return std::filesystem::temp_directory_path() / "vram_cli_test" / std::to_string(getpid());
}

std::filesystem::path test_dir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const auto dir = process_dir() / (info != nullptr ? info->name() : "outside_a_test");
  std::filesystem::create_directories(dir);
  return dir;
}

struct remove_process_dir : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(process_dir(), ec);
  }
};
[[maybe_unused]] auto* const cleanup = ::testing::AddGlobalTestEnvironment(new remove_process_dir);

split_outcome run_split(const std::string& args) {
  const auto err_path = test_dir() / "stderr.txt";
  const outcome o = run(args + " 2>" + err_path.string() + " #");  // run()'s own 2>&1 becomes a comment
  std::ifstream in(err_path);
  return {o.code, o.out, std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>())};
}

std::string write_file(const std::string& name, const std::string& text) {
  const auto path = (test_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

// A 3 MiB, B 3 MiB, free A, C 1 MiB. With cuda-direct on the simulated device: A and B take 4 MiB of pages
// each (8 MiB), C a 2 MiB page of its own after A's 4 MiB went back: the device peaks at 8 MiB; live peaks at
// A + B = 6 MiB.
const char* small_trace =
    "time_us,action,addr,size,stream\n"
    "0,alloc,4096,3145728,0\n"
    "10,alloc,8192,3145728,0\n"
    "20,free_requested,4096,3145728,0\n"
    "30,alloc,12288,1048576,0\n"
    "40,free_requested,8192,3145728,0\n"
    "50,free_requested,12288,1048576,0\n";

TEST(Cli, ReplayPrintsTheExactFiguresAsJson) {
  const auto path = write_file("small.csv", small_trace);
  const outcome o = run("replay " + path + " --policy cuda-direct --device sim --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j.size(), 1u);
  const auto& r = j[0];
  EXPECT_EQ(r["trace"], "small");
  EXPECT_EQ(r["policy"], "cuda-direct");
  EXPECT_EQ(r["events"], 6);
  EXPECT_EQ(r["peak_live_bytes"], 6 * MiB);
  EXPECT_EQ(r["peak_reserved_bytes"], 8 * MiB);
  EXPECT_DOUBLE_EQ(r["reserved_over_live"].get<double>(), 8.0 / 6.0);
  EXPECT_EQ(r["failed_allocations"], 0);
  EXPECT_TRUE(r["recorded_peak_reserved_bytes"].is_null());
  EXPECT_DOUBLE_EQ(r["trace_seconds"].get<double>(), 50e-6);
  EXPECT_EQ(r["device_calls"]["legacy_malloc"], 3);
  EXPECT_EQ(r["device_calls"]["legacy_free"], 3);
  for (const char* key : {"modelled_driver_seconds", "replay_seconds", "events_per_second"})
    EXPECT_TRUE(r.contains(key)) << key;
}

// A policy with settings keeps them in its name, in the table, the JSON and a fit's JSON: rows of one policy
// under two settings must not read alike. PyTorch's own "key:value,key:value" form stays one policy.
TEST(Cli, APolicysSettingsStayInItsName) {
  const auto path = write_file("small.csv", small_trace);
  const std::string specs = "vram,vram:max_cached_ratio=0.1,torch-native:expandable_segments:True,max_split_size_mb:128";
  const outcome o = run("replay " + path + " --policy " + specs + " --device sim --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["policy"], "vram");
  EXPECT_EQ(j[1]["policy"], "vram:max_cached_ratio=0.1");
  EXPECT_EQ(j[2]["policy"], "torch-native:expandable_segments:True,max_split_size_mb:128");
  const outcome table = run("replay " + path + " --policy vram,vram:max_cached_ratio=0.1 --device sim");
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_THAT(table.out, ::testing::HasSubstr("\nsmall  vram:max_cached_ratio=0.1  "));
  const outcome f = run("fit " + path + " --policy vram:small_handle=2MiB --json");
  ASSERT_EQ(f.code, 0) << f.out;
  EXPECT_EQ(nlohmann::json::parse(f.out)[0]["policy"], "vram:small_handle=2MiB");
  const std::string page = (test_dir() / "report.html").string();
  const split_outcome r = run_split("report " + path + " --policy vram,vram:max_cached_ratio=0.1 --no-fit --no-curve "
                                    "--json -o " + page);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const auto reserved = nlohmann::json::parse(r.out)["traces"][0]["series"]["reserved"];
  ASSERT_EQ(reserved.size(), 2u);
  EXPECT_EQ(reserved[0]["policy"], "vram");
  EXPECT_EQ(reserved[1]["policy"], "vram:max_cached_ratio=0.1");
}

// --counters: under the table, each row's calls by kind and its allocator's counters. cuda-direct makes a
// cudaMalloc and a cudaFree per block and keeps no counters. PyTorch's allocator puts A (3 MiB, under 10 MiB)
// in a 20 MiB segment of its large pool, B in the rest of it, and C (1 MiB, small) in a 2 MiB segment of its
// small pool: two segments, two cudaMallocs, none freed (its zero counters are left out).
TEST(Cli, CountersListEachRowsCallsByKindAndTheAllocatorsOwn) {
  const auto path = write_file("small.csv", small_trace);
  const outcome o = run("replay " + path + " --policy cuda-direct,torch-native --device sim --counters");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto tail = o.out.substr(o.out.find("Driver calls by kind"));
  EXPECT_THAT(tail, ::testing::HasSubstr("small  cuda-direct   calls     legacy_malloc 3, legacy_free 3\n"
                                         "                     counters  (the allocator keeps none)\n"
                                         "small  torch-native  calls     legacy_malloc 2\n"
                                         "                     counters  segments 2, num_device_alloc 2\n"));
  EXPECT_EQ(run("replay " + path + " --policy cuda-direct --device sim").out.find("Driver calls by kind"),
            std::string::npos);
}

TEST(Cli, ExtremeTimesAndSegmentSizesAreReadReplayedFittedAndChecked) {
  // Times 0 and 2^63 - 1 us; two recorded segments of 2^63 - 1 bytes. Under UBSan (the sanitizer suite) any
  // signed overflow in the time scaling or the segment sum fails this test.
  const auto path = write_file("extreme.csv",
                               "time_us,action,addr,size,stream\n"
                               "0,segment_alloc,4096,9223372036854775807,0\n"
                               "0,segment_alloc,8192,9223372036854775807,0\n"
                               "0,alloc,4096,1024,0\n"
                               "9223372036854775807,free_requested,4096,1024,0\n");
  outcome o = run("replay " + path + " --policy vram,torch-native --device sim --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j.size(), 2u);
  for (const auto& r : j) {
    EXPECT_EQ(r["peak_live_bytes"], 1024);
    EXPECT_EQ(r["recorded_peak_reserved_bytes"], 18446744073709551614u);  // 2 x (2^63 - 1)
  }
  o = run("fit " + path + " --policy vram --json");
  EXPECT_EQ(o.code, 0) << o.out;
  o = run("check " + path);
  EXPECT_EQ(o.code, 0) << o.out;
}

// Without --to, the output's name chooses: PyTorch's CSV for .csv and .csv.gz, vram's format otherwise.
// small.csv's six rows come back as the same CSV, byte for byte, through either.
TEST(Cli, ConvertWritesTheFormatTheOutputsNameAsksFor) {
  const auto dir = test_dir();
  const std::string src = std::string(VRAM_TEST_DATA) + "/../../examples/traces/small.csv";
  const std::string vram_out = (dir / "small.trace").string(), csv_out = (dir / "back.csv").string();
  const outcome to_vram = run("convert " + src + " -o " + vram_out);
  EXPECT_EQ(to_vram.code, 0) << to_vram.out;
  EXPECT_THAT(to_vram.out, ::testing::HasSubstr("6 events, vram format"));
  const outcome to_csv = run("convert " + vram_out + " -o " + csv_out);
  EXPECT_EQ(to_csv.code, 0) << to_csv.out;
  EXPECT_THAT(to_csv.out, ::testing::HasSubstr("6 events, torch format"));
  auto slurp = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(slurp(csv_out), slurp(src));
  EXPECT_THAT(run("convert " + vram_out + " -o " + (dir / "back.csv.gz").string()).out,
              ::testing::HasSubstr("6 events, torch format"));
  EXPECT_THAT(run("convert " + src + " -o " + (dir / "x.csv").string() + " --to vram").out,
              ::testing::HasSubstr("6 events, vram format"));
  // An RMM log has no rows for segments or completed frees: of 5 rows, the alloc and the free are written.
  const std::string with_segments = write_file("seg.csv",
                                               "time_us,action,addr,size,stream\n"
                                               "0,segment_alloc,4096,2097152,0\n"
                                               "1,alloc,4096,1048576,0\n"
                                               "2,free_requested,4096,1048576,0\n"
                                               "3,free_completed,4096,1048576,0\n"
                                               "4,segment_free,4096,2097152,0\n");
  const std::string rmm_out = (dir / "seg.rmm.csv").string();
  const outcome to_rmm = run("convert " + with_segments + " -o " + rmm_out + " --to rmm");
  EXPECT_EQ(to_rmm.code, 0) << to_rmm.out;
  EXPECT_EQ(to_rmm.out, "wrote " + rmm_out + ": 2 events, rmm format (3 rows of 5 left out: an RMM log has no "
                        "segments, completed frees or snapshots)\n");
  EXPECT_THAT(run("check " + rmm_out + " --json").out, ::testing::HasSubstr("\"events\": 2,"));
}

// Each command's help ends with the exit statuses; the list of policies only where --policy is taken.
TEST(Cli, TheListOfPoliciesEndsTheHelpOfTheCommandsThatTakeOne) {
  for (const char* cmd : {"replay", "fit", "report", "soak"}) {
    EXPECT_THAT(run(std::string(cmd) + " --help").out, ::testing::HasSubstr("Policies (--policy")) << cmd;
  }
  for (const char* cmd : {"convert", "simulate", "check", "info"}) {
    const outcome o = run(std::string(cmd) + " --help");
    EXPECT_THAT(o.out, ::testing::Not(::testing::HasSubstr("Policies ("))) << cmd;
    EXPECT_THAT(o.out, ::testing::HasSubstr("Exit status: 0 done")) << cmd;
  }
}

// demo takes any device (parse_device_spec), and its --help says so as replay's does: before, it listed only
// auto, sim and sim:CAPACITY.
TEST(Cli, DemoHelpListsEveryDeviceItTakes) {
  const outcome o = run("demo --help");
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, ::testing::HasSubstr("-d,--device TEXT=auto       auto, sim, sim:CAPACITY (e.g. sim:80GiB), with "
                                          ",costs=lent or ,costs=FILE.json (a card's own costs) and ,lag=5ms"));
}

// vram info --json holds every figure of its table: on an 80 GiB simulated device (81920 MiB, 85899345920
// bytes) nothing is used or held, and the granule is 2 MiB.
TEST(Cli, InfoJsonHoldsTheTablesFigures) {
  const outcome o = run("info --device sim:80GiB --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["device"], "simulated device (81920 MiB, 2 MiB granules)");
  EXPECT_EQ(j["total_bytes"], 85899345920u);
  EXPECT_EQ(j["free_bytes"], 85899345920u);
  EXPECT_EQ(j["used_bytes"], 0u);
  EXPECT_EQ(j["held_bytes"], 0u);
  EXPECT_EQ(j["granularity_bytes"], 2097152u);
  EXPECT_TRUE(j["compute_capability"].is_null());
  EXPECT_TRUE(j["driver_version"].is_null());
  const outcome table = run("info --device sim:80GiB");
  EXPECT_THAT(table.out, ::testing::HasSubstr("used memory         0 B (0 bytes) (every process)"));
  EXPECT_THAT(table.out, ::testing::HasSubstr("total memory        80.00 GiB (85899345920 bytes)"));
}

TEST(Cli, RecordRunsTheCommandWithTheRecorderAndSaysWhatItWrote) {
  EXPECT_EQ(run("record").code, 2);
  EXPECT_THAT(run("record").out, ::testing::HasSubstr("vram record needs a command to run"));
  const outcome missing = run("record --library /no/such/libvram_record.so -- true");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.out, ::testing::HasSubstr("--library /no/such/libvram_record.so: no such file"));
  // A stand-in for the recorder (the CUDA driver, which would load it, is absent here): the command itself
  // writes what the recorder would, for devices 0 and 1, and exits 4. vram record passes the recorder and the
  // output to the command, reads back both files (6 events, A 3 MiB + B 3 MiB live at once: 6 MiB), and
  // exits with the command's status.
  const auto dir = test_dir();
  const std::string small = (dir / "small.vram").string();
  ASSERT_EQ(run("convert " + std::string(VRAM_TEST_DATA) + "/../../examples/traces/small.csv -o " + small).code, 0);
  const std::string out = (dir / "run.vram").string();
  const outcome o = run("record --library /bin/true -o " + out + " -- sh -c 'test \"$CUDA_INJECTION64_PATH\" = /bin/true && "
                        "cp " + small + " \"$VRAM_RECORD_OUTPUT\" && cp " + small +
                        " \"${VRAM_RECORD_OUTPUT%.vram}.dev1.vram\" && exit 4'");
  EXPECT_EQ(o.code, 4) << o.out;
  EXPECT_THAT(o.out, ::testing::HasSubstr("\nrun.vram            6       3   6.00 MiB            -  0.000 s\n"));
  EXPECT_THAT(o.out, ::testing::HasSubstr("\nrun.dev1.vram       6       3   6.00 MiB            -  0.000 s\n"));
  EXPECT_THAT(o.out, ::testing::HasSubstr("shows its segments, not its tensors"));
  EXPECT_THAT(o.out, ::testing::HasSubstr("vram record: 'sh' exited with status 4"));
  // A command that writes nothing: the recording of the run before stays as it was, and is said to.
  const outcome none = run("record --library /bin/true -o " + out + " -- true");
  EXPECT_EQ(none.code, 1);
  EXPECT_THAT(none.out, ::testing::HasSubstr("vram record: 'true' ran and wrote no recording"));
  EXPECT_THAT(none.out, ::testing::HasSubstr("; " + out + " is as it was\n"));
  EXPECT_EQ(std::filesystem::file_size(out), std::filesystem::file_size(small));
  EXPECT_TRUE(std::filesystem::exists(dir / "run.dev1.vram"));
  // A run that records device 0 only replaces the output, and the run before's device 1 goes with it: it
  // would be taken for this run's. No file of the run's own is left beside them.
  // A process the program started records to OUTPUT.pidN: that file takes the output's name too.
  const outcome one = run("record --library /bin/true -o " + out + " -- sh -c 'cp " + small +
                          " \"$VRAM_RECORD_OUTPUT\" && cp " + small + " \"$VRAM_RECORD_OUTPUT.pid77\"'");
  EXPECT_EQ(one.code, 0) << one.out;
  EXPECT_TRUE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(dir / "run.dev1.vram"));
  EXPECT_TRUE(std::filesystem::exists(dir / "run.vram.pid77"));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 3u);  // small.vram, run.vram and run.vram.pid77
  // An output the recording cannot be written to is refused before the program runs.
  const std::string marker = (dir / "ran").string();
  const outcome folder = run("record --library /bin/true -o " + dir.string() + " -- touch " + marker);
  EXPECT_EQ(folder.code, 1) << folder.out;
  EXPECT_THAT(folder.out, ::testing::HasSubstr(dir.string() + ": cannot create: it is a folder"));
  const outcome nowhere = run("record --library /bin/true -o /no/such/folder/run.vram -- touch " + marker);
  EXPECT_EQ(nowhere.code, 1) << nowhere.out;
  EXPECT_THAT(nowhere.out, ::testing::HasSubstr("/no/such/folder/run.vram: cannot create: /no/such/folder is not a "
                                                "folder this user may write to"));
  EXPECT_FALSE(std::filesystem::exists(marker));
  EXPECT_TRUE(std::filesystem::is_directory(dir));
}

// What the program's children recorded is the run's recording too; the program's own options stay its own
// without "--"; a program that cannot run is said to before anything, with a shell's status.
TEST(Cli, RecordListsEveryProcesssFileAndKeepsTheProgramsOptions) {
  const auto dir = test_dir();
  const std::string small = (dir / "small.vram").string();
  ASSERT_EQ(run("convert " + std::string(VRAM_TEST_DATA) + "/../../examples/traces/small.csv -o " + small).code, 0);
  const std::string out = (dir / "run.vram").string();
  // The run before: the output, a device 1 and a child's file, all to be replaced.
  for (const char* name : {"run.vram", "run.dev1.vram", "run.vram.pid5"})
    std::filesystem::copy_file(small, dir / name);
  // Only a process the program started records (a launcher): its file is listed, and the run is a success.
  const outcome child = run("record --library /bin/true -o " + out + " -- sh -c 'cp " + small +
                            " \"$VRAM_RECORD_OUTPUT.pid77\"'");
  EXPECT_EQ(child.code, 0) << child.out;
  EXPECT_THAT(child.out, ::testing::HasSubstr("\nrun.vram.pid77       6       3   6.00 MiB            -  0.000 s\n"));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"run.vram.pid77", "small.vram"}));
  // Without "--": the program's "-o" is its own, and vram record's output keeps its default name.
  const outcome printf_run = run("record --library /bin/true -o " + out + " printf '<%s>' -o x --json");
  EXPECT_EQ(printf_run.code, 1) << printf_run.out;
  EXPECT_THAT(printf_run.out, ::testing::HasSubstr("<-o><x><--json>"));
  EXPECT_THAT(printf_run.out, ::testing::HasSubstr("'printf' ran and wrote no recording"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x"));
  // A link as the output is written through, as every trace vram writes.
  std::filesystem::create_symlink(dir / "target.vram", dir / "link.vram");
  const outcome link = run("record --library /bin/true -o " + (dir / "link.vram").string() + " -- sh -c 'cp " +
                           small + " \"$VRAM_RECORD_OUTPUT\"'");
  EXPECT_EQ(link.code, 0) << link.out;
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.vram"));
  EXPECT_EQ(std::filesystem::file_size(dir / "target.vram"), std::filesystem::file_size(small));
  // A file of the user's own named like a run's (not a vram trace) is never removed with the run before's.
  write_file("run.dev1.vram", "mine");
  const outcome keeps = run("record --library /bin/true -o " + out + " -- sh -c 'cp " + small +
                            " \"$VRAM_RECORD_OUTPUT\"'");
  EXPECT_EQ(keeps.code, 0) << keeps.out;
  EXPECT_EQ(vram::detail::read_file_bytes((dir / "run.dev1.vram").string()), "mine");
  EXPECT_FALSE(std::filesystem::exists(dir / "run.vram.pid77"));  // the run before's, a trace: gone
  // A hidden output's device files are named as the recorder names them beside it: .run.dev1.vram.
  const outcome hidden = run("record --library /bin/true -o " + (dir / ".run.vram").string() + " -- sh -c 'cp " +
                             small + " \"$VRAM_RECORD_OUTPUT\" && cp " + small +
                             " \"$(dirname \"$VRAM_RECORD_OUTPUT\")/.run.dev1.vram\"'");
  EXPECT_EQ(hidden.code, 0) << hidden.out;
  EXPECT_TRUE(std::filesystem::exists(dir / ".run.dev1.vram"));
  // A file that is no trace is said, and the others are put in place and listed all the same; the run
  // before's file of that name stays, as nothing took its place.
  std::filesystem::copy_file(small, dir / "run.vram.pid9");
  const split_outcome bad = run_split("record --library /bin/true --json -o " + out + " -- sh -c 'cp " + small +
                                      " \"$VRAM_RECORD_OUTPUT\" && echo junk > \"$VRAM_RECORD_OUTPUT.pid9\"'");
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, ::testing::HasSubstr("run.vram.pid9"));
  EXPECT_THAT(bad.err, ::testing::HasSubstr("(the recording is kept in "));
  const auto listed = nlohmann::json::parse(bad.out);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["file"], out);
  EXPECT_EQ(std::filesystem::file_size(dir / "run.vram.pid9"), std::filesystem::file_size(small));
  // A script without "#!" runs under the shell, as a shell runs it; an unknown option is refused as typed.
  const std::string script = write_file("plain.sh", "cp " + small + " \"$VRAM_RECORD_OUTPUT\"\n");
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  EXPECT_EQ(run("record --library /bin/true -o " + out + " -- " + script).code, 0);
  const outcome bogus = run("record --bogus " + script);
  EXPECT_EQ(bogus.code, 2);
  EXPECT_THAT(bogus.out, ::testing::HasSubstr("--bogus"));
  EXPECT_THAT(bogus.out, ::testing::Not(::testing::HasSubstr("--bogus --")));
  // Bad outputs and programs, before anything runs: the shell's 127 for a program that is not there, and an
  // empty list for --json.
  const outcome empty = run("record --library /bin/true -o '' -- true");
  EXPECT_EQ(empty.code, 2);
  EXPECT_THAT(empty.out, ::testing::HasSubstr("vram: --output: was given no value (vram record --help)"));
  const outcome csv = run("record --library /bin/true -o run.CSV -- true");
  EXPECT_EQ(csv.code, 2);
  EXPECT_THAT(csv.out, ::testing::HasSubstr("vram: -o run.CSV: a recording is written in vram's format, uncompressed, "
                                            "as it runs; name a .vram file, and convert it afterwards"));
  const split_outcome absent = run_split("record --library /bin/true --json -o " + out + " -- /no/such/program");
  EXPECT_EQ(absent.code, 127);
  EXPECT_EQ(absent.out, "[]\n");
  EXPECT_EQ(absent.err, "vram: cannot run '/no/such/program': no such file\n");
  const outcome unrunnable = run("record --library /bin/true -o " + out + " -- " + small);
  EXPECT_EQ(unrunnable.code, 126);
  EXPECT_THAT(unrunnable.out, ::testing::HasSubstr("it is not a program this user may run"));
  EXPECT_THAT(run("record --help").out, ::testing::HasSubstr("Exit status: the program's (126: it may not be run; "
                                                             "127: no such program; 128 + N: signal N ended it)"));
  // A program a signal killed: said in words, with a shell's status.
  const outcome killed = run("record --library /bin/true -o " + out + " -- sh -c 'kill -SEGV $$'");
  EXPECT_EQ(killed.code, 128 + SIGSEGV);
  EXPECT_THAT(killed.out, ::testing::HasSubstr("'sh' was killed by signal 11 (Segmentation fault) and wrote no recording"));
}

// The CUDA toolkit's stub libcuda found before the driver (a library path naming lib64/stubs, a common container
// mistake) is named as such, not as a bare error number.
TEST(Cli, TheToolkitsStubDriverIsNamed) {
  const std::filesystem::path stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
#if VRAM_HAVE_CUDA_H
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
#else
  GTEST_SKIP() << "built without cuda.h";
#endif
  const auto dir = test_dir();
  std::filesystem::create_symlink(stub, dir / "libcuda.so.1");
  const char* was = std::getenv("LD_LIBRARY_PATH");
  const std::string before = was != nullptr ? was : "";
  ASSERT_EQ(setenv("LD_LIBRARY_PATH", dir.c_str(), 1), 0);
  const outcome o = run("info --device cuda");
  if (was != nullptr) setenv("LD_LIBRARY_PATH", before.c_str(), 1);
  else unsetenv("LD_LIBRARY_PATH");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.out, "vram: device 'cuda': CUDA is not available (libcuda.so.1 is the CUDA toolkit's stub "
                   "(CUDA_ERROR_STUB_LIBRARY), not the driver's: a library path (LD_LIBRARY_PATH, ld.so.conf) names "
                   "the toolkit's lib64/stubs before the driver); use --device sim\n");
}

// Output that cannot be written is an error, not a success; a file that cannot be written after a measurement
// leaves the measurement on standard output.
TEST(Cli, OutputThatCannotBeWrittenExits1AndLosesNoMeasurement) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const split_outcome info = run_split("info --device sim >/dev/full");
  EXPECT_EQ(info.code, 1);
  EXPECT_THAT(info.err, ::testing::HasSubstr("vram: cannot write the output: No space left on device\n"));
  const split_outcome help = run_split("--help >/dev/full");
  EXPECT_EQ(help.code, 1);
  const split_outcome bench = run_split("bench --device sim --sizes 512 --threads 1 --seconds 0.01 --json-file /dev/full");
  EXPECT_EQ(bench.code, 1);
  EXPECT_THAT(bench.out, ::testing::HasSubstr("vram"));  // the table, printed before the file was tried
  EXPECT_THAT(bench.err, ::testing::HasSubstr("/dev/full: cannot write: No space left on device"));
}

// Signals while the program runs. SIGTERM sent to vram record (as kill or timeout send it) goes on to the
// program, here a second after it wrote its recording, and the recording is put in place all the same. A
// program that SIGINT ended has its recording put in place, and vram record then ends by SIGINT too.
TEST(Cli, RecordPassesSignalsOnAndPutsTheRecordingInPlace) {
  const auto dir = test_dir();
  const std::string small = (dir / "small.vram").string();
  ASSERT_EQ(run("convert " + std::string(VRAM_TEST_DATA) + "/../../examples/traces/small.csv -o " + small).code, 0);
  const std::string out = (dir / "run.vram").string();
  const outcome term = run("record --library /bin/true -o " + out + " -- sh -c 'cp " + small +
                           " \"$VRAM_RECORD_OUTPUT\" && sleep 1 && kill -TERM $PPID && exec sleep 30'");
  EXPECT_EQ(term.code, 128 + SIGTERM) << term.out;
  EXPECT_THAT(term.out, ::testing::HasSubstr("\nrun.vram       6       3   6.00 MiB"));
  EXPECT_TRUE(std::filesystem::exists(out));
  std::filesystem::remove(out);
  // The shell popen starts is replaced by vram (exec), so that pclose sees how vram itself ended.
  const std::string cmd = "exec " + std::string(VRAM_CLI_PATH) + " record --library /bin/true -o " + out +
                          " -- sh -c 'cp " + small + " \"$VRAM_RECORD_OUTPUT\" && kill -INT $$' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), buf.size(), p) != nullptr) {
  }
  const int status = pclose(p);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_TRUE(std::filesystem::exists(out));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 2u);  // small.vram and run.vram: nothing left under a hidden name
}

TEST(Cli, ASnapshotsInferredStartIsSaidOnStderrAndInEveryJson) {
  // preexisting.pickle: recording began after 3 tensors were allocated (tests/data/snapshots); the reader
  // notes 3 things (blocks, segments, the late start), in each command's JSON as on standard error.
  const std::string snap = std::string(VRAM_TEST_DATA) + "/snapshots/preexisting.pickle";
  const auto json_of = [](const outcome& o) {  // run() merges standard error in: the JSON is what follows it
    const auto at = o.out.find("[\n");
    return nlohmann::json::parse(at == std::string::npos ? std::string("null") : o.out.substr(at));
  };
  for (const std::string args : {"replay " + snap + " --policy torch-native --device sim --json",
                                 "fit " + snap + " --policy torch-native --json"}) {
    const outcome o = run(args);
    ASSERT_EQ(o.code, 0) << args;
    const auto rows = json_of(o);
    ASSERT_EQ(rows[0]["trace_notes"].size(), 3u) << args;
    EXPECT_THAT(rows[0]["trace_notes"][0].get<std::string>(),
                ::testing::StartsWith("3 blocks (45093768 bytes) were live before the first entry"));
    EXPECT_THAT(o.out, ::testing::HasSubstr("note: " + snap + " (preexisting): 3 blocks"));
  }
  const outcome check = run("check " + snap + " --json");
  EXPECT_EQ(json_of(check)[0]["notes"].size(), 3u);
}

// A trace of another file with the snapshot's name gets none of its notes: before, replay's JSON kept the
// notes by trace name, and the CSV's row (read first) carried the snapshot's three.
TEST(Cli, ReplayJsonGivesEachTraceItsOwnNotes) {
  const std::string snap = std::string(VRAM_TEST_DATA) + "/snapshots/preexisting.pickle";
  const auto csv = write_file("preexisting.csv", small_trace);
  const split_outcome o = run_split("replay " + csv + " " + snap + " --policy cuda-direct --device sim --json");
  ASSERT_EQ(o.code, 0) << o.err;
  const auto rows = nlohmann::json::parse(o.out);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["trace"], "preexisting");
  EXPECT_EQ(rows[0]["events"], 6);
  EXPECT_FALSE(rows[0].contains("trace_notes")) << rows[0].dump();
  EXPECT_EQ(rows[1]["trace"], "preexisting");
  EXPECT_EQ(rows[1]["trace_notes"].size(), 3u);
}

// fit checks every policy's settings before it reads a trace or searches: before, it searched under
// torch-native first (printing the snapshot's notes) and refused the setting after.
TEST(Cli, FitRefusesABadSettingBeforeAnySearch) {
  const std::string snap = std::string(VRAM_TEST_DATA) + "/snapshots/preexisting.pickle";
  const outcome o = run("fit " + snap + " --policy torch-native,vram:block_handles=abc");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.out, "vram: vram pool setting block_handles: 'abc': want a whole number from 0 to 1024\n");
}

TEST(Cli, VersionHelpAndUnknownCommandsSayWhatTheyAre) {
  EXPECT_EQ(run("--version").out, "vram " VRAM_VERSION "\n");
  EXPECT_EQ(run("version").out, "vram " VRAM_VERSION "\n");
  const outcome o = run("foo");
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.out, ::testing::StartsWith("vram: unknown command 'foo'; the commands: replay, fit,"));
  const outcome help = run("--help");
  EXPECT_EQ(help.code, 0);
  for (const char* name : {"vram ", "cuda-direct", "torch-native", "torch-expandable", "rmm-pool", "cub-bins"})
    EXPECT_THAT(help.out, ::testing::HasSubstr(std::string("\n  ") + name)) << name;
}

TEST(Cli, AReplayWithFailedAllocationsSaysWhereAndExits3) {
  // small_trace under cuda-direct on a 4 MiB device: A (3 MiB) takes all 4 MiB of pages, so B (event 2)
  // fails with nothing free; after A's free, C (1 MiB) fits. One of three allocations failed.
  const auto path = write_file("small.csv", small_trace);
  outcome o = run("replay " + path + " --policy cuda-direct --device sim:4MiB");
  EXPECT_EQ(o.code, 3) << o.out;
  EXPECT_THAT(o.out, ::testing::HasSubstr("first failure: small under cuda-direct: event 2 at 0.000 s, 1 of 3 "
                                          "allocations failed, 0.0% of the device free then\n"));
  o = run("replay " + path + " --policy cuda-direct --device sim:4MiB --allow-failures");
  EXPECT_EQ(o.code, 0) << o.out;
  o = run("replay " + path + " --policy cuda-direct --device sim:4MiB --json");
  EXPECT_EQ(o.code, 3);
  o = run("replay " + path + " --policy cuda-direct --device sim:64MiB");
  EXPECT_EQ(o.code, 0);
  EXPECT_THAT(o.out, ::testing::Not(::testing::HasSubstr("first failure")));
}

TEST(Cli, ReportWritesOnePageAndSaysTheFailureInWords) {
  // As above: under cuda-direct on a 4 MiB device, B (event 2) fails with nothing free; the page is written
  // all the same (exit 0: the page is about the failure).
  const auto path = write_file("small.csv", small_trace);
  const std::string page = (test_dir() / "report.html").string();
  outcome o = run("report " + path + " --policy cuda-direct --device sim:4MiB --no-fit --no-curve -o " + page);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_THAT(o.out, ::testing::HasSubstr("wrote " + page));
  EXPECT_THAT(o.out, ::testing::HasSubstr("small: At 0.000 s a "));
  EXPECT_THAT(o.out, ::testing::HasSubstr("request failed under cuda-direct"));
  ASSERT_TRUE(std::filesystem::exists(page));
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(html, ::testing::HasSubstr("<script type=\"application/json\" id=\"vram-data\">"));
  // --json prints the page's data, on one line, and says on standard error that it wrote the page.
  std::filesystem::remove(page);
  const split_outcome j =
      run_split("report " + path + " --policy cuda-direct --device sim:4MiB --no-fit --no-curve --json -o " + page);
  EXPECT_EQ(j.code, 0) << j.err;
  EXPECT_EQ(nlohmann::json::parse(j.out)["traces"][0]["failures"].size(), 1u);
  EXPECT_EQ(std::count(j.out.begin(), j.out.end(), '\n'), 1);
  EXPECT_THAT(j.err, ::testing::StartsWith("wrote " + page + " ("));
  EXPECT_TRUE(std::filesystem::exists(page));
  // Said before any replay: a folder that cannot take the page, a GPU device, an unreadable trace.
  o = run("report " + path + " -o /nonexistent-vram-dir/r.html");
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.out, ::testing::HasSubstr("cannot create"));
  o = run("report " + path + " --device cuda -o " + page);
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.out, ::testing::HasSubstr("simulated device"));
  o = run("report " + (test_dir() / "missing.csv").string() + " -o " + page);
  EXPECT_EQ(o.code, 1);
}

TEST(Cli, ReportAPageNamedAsOneOfItsTracesIsRefusedAndTheTraceKept) {
  // Before, the trace was read, replayed and then replaced by the page (exit 0), its rows lost.
  const std::filesystem::path trace = write_file("small.csv", small_trace);
  const outcome same = run("report " + trace.string() + " --no-fit --no-curve -o " + trace.string());
  EXPECT_EQ(same.code, 2) << same.out;
  EXPECT_EQ(same.out, "vram: bad --output " + trace.string() + ": it is the trace " + trace.string() +
                          ", which the page would replace\n");
  // Another spelling of the same file, and the trace second of two.
  const std::string other = (trace.parent_path() / "." / "small.csv").string();
  const outcome spelled = run("report " + trace.string() + " " + trace.string() + " --no-fit --no-curve -o " + other);
  EXPECT_EQ(spelled.code, 2) << spelled.out;
  std::ifstream in(trace);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()), small_trace);
}

// Any option given empty is refused, not read as 0 ("bad time per cell 0") or taken for absent (--format ''); an
// option before the command is said to be; counts in a message agree with their nouns.
TEST(Cli, EmptyOptionsMisplacedOptionsAndTooLongBenchesAreSaidPlainly) {
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"bench --seconds ''", "vram: --seconds: was given no value (vram bench --help)\n"},
           {"soak --headroom ''", "vram: --headroom: was given no value (vram soak --help)\n"},
           {"bench --device sim --seconds 3601 --sizes 512 --threads 1 --repeat 1",
            "vram: 3601 s per cell over 2 cells (1 size x 1 thread count x 2 allocators), once, is more than an hour; "
            "lower --seconds or --repeat, or measure fewer cells\n"},
           {"simulate mixed --format '' -o x.vtrace", "vram: --format: was given no value (vram simulate --help)\n"},
           {"--json info", "vram: arguments not expected before the command: --json (a command's options go after "
                           "it: vram info --help)\n"}}) {
    const outcome o = run(args);
    EXPECT_EQ(o.code, 2) << args;
    EXPECT_EQ(o.out, says) << args;
  }
}

// A workload setting the workload does not read is refused rather than taken without effect.
TEST(Cli, SimulateRefusesASettingTheWorkloadDoesNotRead) {
  const outcome hours = run("simulate mixed --hours 1 -o " + (test_dir() / "m.vtrace").string());
  EXPECT_EQ(hours.code, 2);
  EXPECT_EQ(hours.out, "vram: --hours applies to the inference workload only; mixed does not read it\n");
  const outcome scale = run("simulate alternating --scale 2 -o " + (test_dir() / "a.vtrace").string());
  EXPECT_EQ(scale.code, 2);
  EXPECT_EQ(scale.out, "vram: --scale applies to the mixed workload only; alternating does not read it\n");
  EXPECT_FALSE(std::filesystem::exists(test_dir() / "m.vtrace"));
}

TEST(Cli, ReportAnEmptyOutputIsABadArgumentSaidBeforeTheReplays) {
  // Before: the replays ran, then "vram: : cannot write: No such file or directory" and exit 1.
  const outcome o = run("report " + write_file("small.csv", small_trace) + " -o ''");
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(o.out, "vram: --output: was given no value (vram report --help)\n");
}

TEST(Cli, ReportAPolicyNamedTwiceIsRefused) {
  // Before: two lines named "vram reserved", and a failure under vram compared with vram itself.
  const auto trace = write_file("small.csv", small_trace);
  const std::string page = (test_dir() / "r.html").string();
  const outcome twice = run("report " + trace + " --policy vram,torch-native,vram -o " + page);
  EXPECT_EQ(twice.code, 2) << twice.out;
  EXPECT_EQ(twice.out, "vram: bad --policy vram,torch-native,vram: it names vram twice (settings make another "
                       "policy: vram:NAME=VALUE)\n");
  EXPECT_FALSE(std::filesystem::exists(page));
  // The same policy with settings is another policy.
  const outcome settings = run("report " + trace + " --policy vram,vram:small_handle=2MiB --no-fit --no-curve -o " + page);
  EXPECT_EQ(settings.code, 0) << settings.out;
}

TEST(Cli, ReportAnInfiniteAtIsABadArgument) {
  // Before: accepted, and drawn at the last row labelled "at inf h".
  const outcome o = run("report " + write_file("small.csv", small_trace) + " --at inf -o " + (test_dir() / "r.html").string());
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(o.out, "vram: bad --at inf: seconds from the trace's start, a finite number 0 or more\n");
}

TEST(Cli, BenchWritesItsJsonFileOnceTheRunIsDoneAndSaysABadPathBeforeIt) {
  const auto file = write_file("bench.json", "the results of an earlier run\n");
  auto contents = [&] {
    std::ifstream in(file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  // A plan of more than an hour is refused (exit 2) and leaves the file as it was.
  outcome o = run("bench --device sim --seconds 60 --json-file " + file);
  EXPECT_EQ(o.code, 2) << o.out;
  EXPECT_EQ(contents(), "the results of an earlier run\n");
  // A folder that cannot take the file is said at once (exit 1), before any cell runs.
  o = run("bench --device sim --sizes 512 --threads 1 --seconds 0.01 --repeat 1 --json-file " +
          (test_dir() / "no-such-folder" / "bench.json").string());
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_THAT(o.out, ::testing::HasSubstr("is not a folder this user may write to"));
  EXPECT_THAT(o.out, ::testing::Not(::testing::HasSubstr("vram bench on")));
  // A run that ends replaces the file with the JSON printed: one size, one thread count, two allocators.
  o = run("bench --device sim --sizes 512 --threads 1 --seconds 0.01 --repeat 1 --json-file " + file);
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(contents());
  EXPECT_THAT(j.at("command").get<std::string>(), ::testing::HasSubstr("--json-file " + file));
  ASSERT_TRUE(j.contains("rows")) << j.dump();
  EXPECT_EQ(j.at("rows").size(), 2U) << j.dump();  // vram and malloc
}

TEST(Cli, BenchOnTheDeviceFoundSaysWhichOnce) {
  // "running on the simulated device (...)" without a GPU, "running on <the GPU>" with one: in the table's
  // notes, not also on standard error; with --json, on standard error and in the JSON's notes.
  auto count = [](const std::string& text, const std::string& words) {
    std::size_t n = 0;
    for (std::size_t at = text.find(words); at != std::string::npos; at = text.find(words, at + 1)) ++n;
    return n;
  };
  const std::string cell = "bench --device auto --sizes 4K --threads 1 --seconds 0.001 --repeat 1";
  outcome o = run(cell);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(count(o.out, "running on "), 1u) << o.out;
  o = run(cell + " --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(count(o.out, "running on "), 2u) << o.out;
}

TEST(Cli, FitFindsTheSmallestDevice) {
  const auto path = write_file("small.csv", small_trace);
  // Lower end: the largest 2 MiB multiple below 6 MiB live is 4 MiB; upper end: the 8 MiB the device used.
  // 6 MiB fails (B needs 4 MiB beside A's 4), so 8 MiB is the answer after 3 probes (the H200, 8 MiB, 6 MiB);
  // then the 8 capacities above it (10 to 24 MiB) are checked, and fit.
  const outcome o = run("fit " + path + " --policy cuda-direct --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto r = nlohmann::json::parse(o.out)[0];
  EXPECT_EQ(r["fit_bytes"], 8 * MiB);
  EXPECT_EQ(r["fit_probes"], 11);
  EXPECT_EQ(r["fit_monotone"], true);
  EXPECT_EQ(r["lowest_fit_bytes"], 8 * MiB);
  EXPECT_EQ(r["failed_allocations"], 0);
  const outcome unchecked = run("fit " + path + " --policy cuda-direct --verify 0 --json");
  ASSERT_EQ(unchecked.code, 0) << unchecked.out;
  EXPECT_EQ(nlohmann::json::parse(unchecked.out)[0]["fit_probes"], 3);
}

// A 3 MiB, B 1 MiB, C 2 MiB, D 2 MiB, all live at once: 8 MiB. rmm-pool's first block is half the device, its
// growth asks max(request, pool size), halving the ask down to the request when the device refuses; the
// simulated cudaMalloc takes whole 2 MiB pages.
//  -  8 MiB: a 4 MiB block holds A and B; C grows the pool by 4 MiB (the device's last 4), which holds C and D.
//  - 10 MiB: a 5 MiB block (6 MiB of pages) holds A and B, 1 MiB left over. C grows the pool: 5 MiB is refused
//    (4 MiB of pages left), 2.5 MiB taken (all 4). D finds 0.5 MiB free and the device full: it fails.
//  - 12 MiB: a 6 MiB block holds A, B and C; D grows it by 6 MiB, the device's last 6. From 16 MiB the first
//    block holds all four.
// Searching up to 64 MiB: 64 fits, then 32 (what it used), 18, 12, 8 fit; 6 MiB, below the live bytes, is
// never tried. The check of the 8 granules above 8 MiB finds 10 failing, so 12 is the answer, and the granules
// above it are checked in turn: 13 probes.
const char* rmm_not_monotone_trace =
    "time_us,action,addr,size,stream\n"
    "0,alloc,4096,3145728,0\n"
    "10,alloc,8192,1048576,0\n"
    "20,alloc,12288,2097152,0\n"
    "30,alloc,16384,2097152,0\n"
    "40,free_requested,4096,3145728,0\n"
    "50,free_requested,8192,1048576,0\n"
    "60,free_requested,12288,2097152,0\n"
    "70,free_requested,16384,2097152,0\n";

TEST(Cli, FitSaysWhenASmallerDeviceFitsButALargerOneFails) {
  const auto path = write_file("nm.csv", rmm_not_monotone_trace);
  const outcome j = run("fit " + path + " --policy rmm-pool --device sim:64MiB --json");
  ASSERT_EQ(j.code, 0) << j.out;
  const auto r = nlohmann::json::parse(j.out)[0];
  EXPECT_EQ(r["fit_bytes"], 12 * MiB);
  EXPECT_EQ(r["lowest_fit_bytes"], 8 * MiB);
  EXPECT_EQ(r["fit_monotone"], false);
  EXPECT_EQ(r["fit_probes"], 13);
  EXPECT_EQ(r["failed_allocations"], 0);
  const outcome t = run("fit " + path + " --policy rmm-pool --device sim:64MiB");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("not monotone: nm with rmm-pool: fits on 8.00 MiB (4 granules) but fails on a larger device; "
                       "the fit given, 12.00 MiB (6 granules), is above every failure seen, and the 8 granules above "
                       "it fit too.\n"),
            std::string::npos)
      << t.out;
  // Up to an H200 the halvings never land on 8 MiB: no fit is seen below a failure, and no line is printed.
  const outcome h = run("fit " + path + " --policy rmm-pool");
  ASSERT_EQ(h.code, 0) << h.out;
  EXPECT_EQ(h.out.find("not monotone"), std::string::npos) << h.out;
  const auto hr = nlohmann::json::parse(run("fit " + path + " --policy rmm-pool --json").out)[0];
  EXPECT_EQ(hr["fit_bytes"], 12 * MiB);
  EXPECT_EQ(hr["fit_monotone"], true);
}

TEST(Cli, BadArgumentsAndInputNameTheProblem) {
  const auto path = write_file("small.csv", small_trace);
  auto expect = [](const outcome& o, int code, const std::string& words) {
    EXPECT_EQ(o.code, code) << o.out;
    EXPECT_NE(o.out.find(words), std::string::npos) << o.out;
  };
  expect(run("replay " + path + " --policy nosuch --device sim"), 2, "unknown policy 'nosuch'");
  expect(run("replay " + path + " --policy vram --device gpu7"), 2, "bad device 'gpu7'");
  expect(run("replay " + path + " --policy vram --device sim:-5GiB"), 2, "negative");
  expect(run("replay /nonexistent/trace.csv --policy vram --device sim"), 1, "/nonexistent/trace.csv");
  expect(run("replay " + write_file("empty.csv", "") + " --policy vram --device sim"), 1, "empty.csv");
  expect(run("replay " + write_file("cols.csv", "a,b,c\n1,2,3\n") + " --policy vram --device sim"), 1, "cols.csv");
  expect(run("replay " + write_file("act.csv", "time_us,action,addr,size,stream\n0,grab,4096,512,0\n") +
             " --policy vram --device sim"),
         1, "act.csv:2");
  expect(run("replay " + write_file("neg.csv", "time_us,action,addr,size,stream\n0,alloc,4096,-512,0\n") +
             " --policy vram --device sim"),
         1, "neg.csv:2");
  expect(run("replay " + write_file("nan.csv", "time_us,action,addr,size,stream\n0,alloc,4096,big,0\n") +
             " --policy vram --device sim"),
         1, "nan.csv:2");
  expect(run("simulate nosuch -o " + write_file("x.vtrace", "")), 2, "unknown workload 'nosuch'");
  expect(run("bench --device sim --repeat 101"), 2, "bad --repeat 101: from 1 to 100");
  expect(run("bench --device sim --repeat 0"), 2, "bad --repeat 0: from 1 to 100");
  expect(run("bench --device sim --seconds 0.0005"), 2, "bad time per cell 0.0005: a number of seconds from 0.001");
  expect(run("bench --device sim --sizes 512,4K,512"), 2, "size '512' in '512,4K,512' is there twice");
  expect(run("bench --device sim --threads 2,1,1"), 2, "thread count '1' in '2,1,1' is there twice");
  for (const char* option : {"--sizes", "--threads", "--json-file"})
    expect(run(std::string("bench --device sim ") + option + " ''"), 2, std::string(option) + ": was given no value");
  // A size the device cannot hold fails for every allocator: the rows say why, and the run is not a success.
  // (Under AddressSanitizer, malloc of 16 TiB aborts unless told to return null, as glibc's does.)
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string saved = asan != nullptr ? asan : "";
  setenv("ASAN_OPTIONS", (saved.empty() ? std::string() : saved + ":").append("allocator_may_return_null=1").c_str(), 1);
  const outcome failed = run("bench --device sim --sizes 16TiB --threads 1 --seconds 0.01 --repeat 1");
  if (asan != nullptr)
    setenv("ASAN_OPTIONS", saved.c_str(), 1);
  else
    unsetenv("ASAN_OPTIONS");
  EXPECT_EQ(failed.code, 1);
  EXPECT_THAT(failed.out, ::testing::HasSubstr("failed: vram 16 TiB x 1: vram: out of memory allocating 16.00 TiB"));
  EXPECT_THAT(failed.out, ::testing::HasSubstr("vram: bench: every cell failed"));
  expect(run("fit " + path + " --policy vram --verify 65"), 2, "bad --verify 65: from 0 to 64 granules");
  expect(run("fit " + path + " --policy vram --verify -1"), 2, "bad --verify -1: from 0 to 64 granules");
  expect(run("fit " + path + " --policy vram --verify abc"), 2, "--verify");
  expect(run("replay " + path + " --policy vram --nosuch"), 2, "--nosuch");
}

// Every error is one line that starts "vram: " and ends the run with 2, the parser's own among them, and a
// number out of range is refused rather than wrapped, clamped or taken as zero.
TEST(Cli, NumbersOutOfRangeAndParseErrorsAreOneLineAndExit2) {
  const auto path = write_file("small.csv", small_trace);
  const auto out = write_file("w.vtrace", "");
  auto one_line = [](const outcome& o, const std::string& line) {
    EXPECT_EQ(o.code, 2) << o.out;
    EXPECT_EQ(o.out, line + "\n");
  };
  one_line(run("simulate inference --hours -1 -o " + out),
           "vram: --hours -1: want a number of simulated hours above 0 and at most 240");
  one_line(run("simulate inference --hours nan -o " + out),
           "vram: --hours nan: want a number of simulated hours above 0 and at most 240");
  one_line(run("simulate inference --hours 241 -o " + out),
           "vram: --hours 241: want a number of simulated hours above 0 and at most 240");
  one_line(run("simulate mixed --scale 0 -o " + out), "vram: --scale 0: want a whole number from 1 to 1000");
  one_line(run("demo --hours 0"), "vram: --hours 0: want a number of simulated hours above 0 and at most 240");
  one_line(run("soak --hours 1e12"),
           "vram: soak: --hours 1000000000000 must be a number of simulated hours above 0 and at most 240");
  one_line(run("simulate inference --seed -1 -o " + out),
           "vram: --seed: '-1': want a whole number from 0 to 18446744073709551615 (vram simulate --help)");
  one_line(run("simulate inference --seed 18446744073709551616 -o " + out),
           "vram: --seed: '18446744073709551616': want a whole number from 0 to 18446744073709551615 (vram "
           "simulate --help)");
  one_line(run("simulate inference"), "vram: --output is required (vram simulate --help)");
  one_line(run("replay " + path + " --nosuch"), "vram: arguments not expected: --nosuch (vram replay --help)");
  // In the order they were typed (CLI11 names them last first).
  one_line(run("soak --device sim:80GiB"), "vram: arguments not expected: --device sim:80GiB (vram soak --help)");
  one_line(run("info one two"), "vram: arguments not expected: one two (vram info --help)");
  // A setting is checked before the device opens: no line about which device is in use comes first.
  one_line(run("replay " + path + " --policy vram:block_handles=abc"),
           "vram: vram pool setting block_handles: 'abc': want a whole number from 0 to 1024");
  one_line(run("replay " + path + " --policy torch-native:max_split_size_mb=-128"),
           "vram: torch allocator option max_split_size_mb=-128: expected a whole number, 0 or more");
  // The largest seed is a seed.
  EXPECT_EQ(run("simulate alternating --seed 18446744073709551615 -o " + out).code, 0);
}

// A file that cannot be opened, named after one that can, fails before any replay: the one line of its
// error is all the output. (Read first, the snapshot late_start would have printed a note on what its reader
// inferred, under each command.)
TEST(Cli, AMissingFileFailsBeforeTheFilesBeforeItAreReplayed) {
  const std::string path = std::string(VRAM_TEST_DATA) + "/../../examples/traces/late_start.pickle";
  ASSERT_THAT(run("check " + path).out, ::testing::HasSubstr("note: " + path));
  const std::string missing = (test_dir() / "missing.csv").string();
  const std::string report = "report --no-fit --no-curve -o " + (test_dir() / "r.html").string();
  for (const std::string& command : std::vector<std::string>{"replay", "fit", report}) {
    const outcome o = run(command + " " + path + " " + missing + " --policy vram --device sim");
    EXPECT_EQ(o.code, 1) << command;
    EXPECT_EQ(o.out, "vram: " + missing + ": cannot open: No such file or directory\n") << command;
  }
  EXPECT_FALSE(std::filesystem::exists(test_dir() / "r.html"));
  // check too: before, it read late_start first and printed its notes above the error.
  const outcome check = run("check " + path + " " + missing);
  EXPECT_EQ(check.code, 1);
  EXPECT_EQ(check.out, "vram: " + missing + ": cannot open: No such file or directory\n");
}

// simulate and convert say an output they cannot write before making or reading anything.
TEST(Cli, AnOutputThatCannotBeWrittenIsSaidFirst) {
  const std::string nowhere = "/nonexistent-vram-dir/x.vtrace";
  const std::string line = "vram: " + nowhere + ": cannot create: /nonexistent-vram-dir is not a folder this user "
                           "may write to\n";
  const outcome sim = run("simulate inference --hours 240 -o " + nowhere);  // would take a minute to make
  EXPECT_EQ(sim.code, 1);
  EXPECT_EQ(sim.out, line);
  const outcome conv = run("convert " + (test_dir() / "missing.csv").string() + " -o " + nowhere);
  EXPECT_EQ(conv.code, 1);
  EXPECT_EQ(conv.out, line);  // not the missing input: the output is checked first
}

// What report says of a trace's odd rows is what the replays do with them: a double free is skipped; a free
// of a live block with another size frees it whole, and nothing is skipped.
TEST(Cli, ReportSaysWhatTheReplaysDoWithOddRows) {
  const std::string page = (test_dir() / "r.html").string();
  const auto double_free = write_file("df.csv", "time_us,action,addr,size,stream\n0,alloc,4096,1048576,0\n"
                                                "10,free_requested,4096,1048576,0\n20,free_requested,4096,1048576,0\n");
  const split_outcome d = run_split("report " + double_free + " --no-fit --no-curve -o " + page);
  EXPECT_EQ(d.code, 0) << d.err;
  EXPECT_THAT(d.err, ::testing::HasSubstr("the replays skip unmatched and double frees"));
  const auto wrong_size = write_file("ws.csv", "time_us,action,addr,size,stream\n0,alloc,4096,1048576,0\n"
                                               "10,free_requested,4096,2097152,0\n");
  const split_outcome w = run_split("report " + wrong_size + " --no-fit --no-curve -o " + page);
  EXPECT_EQ(w.code, 0) << w.err;
  EXPECT_THAT(w.err, ::testing::HasSubstr("warning: a free with another size frees its block whole\n"));
  EXPECT_THAT(w.err, ::testing::Not(::testing::HasSubstr("skip")));
}

// The pool's environment variables set the vram policy here too, and a command that replays it says so; a
// setting of the policy overrides the variable. On transformer_train, handles of at most 4 MiB are more than
// the defaults' (up to 64 MiB in a burst); the override gives the defaults' count again.
TEST(Cli, ThePoolsEnvironmentVariablesAreNotedAndOverriddenBySettings) {
  const std::string trace = std::string(VRAM_TEST_DATA) + "/../../examples/traces/transformer_train.vram.gz";
  setenv("VRAM_MAX_HANDLE", "4MiB", 1);
  const split_outcome env = run_split("replay " + trace + " --policy vram,vram:max_handle=64MiB --device sim --json");
  unsetenv("VRAM_MAX_HANDLE");
  ASSERT_EQ(env.code, 0) << env.err;
  EXPECT_EQ(env.err, "note: the environment sets the vram pool's settings: VRAM_MAX_HANDLE=4MiB (a --policy "
                     "vram:NAME=VALUE setting overrides one)\n");
  const auto r = nlohmann::json::parse(env.out);
  const split_outcome plain = run_split("replay " + trace + " --policy vram --device sim --json");
  EXPECT_EQ(plain.err, "");
  const auto defaults = nlohmann::json::parse(plain.out)[0]["device_calls"]["mem_create"].get<int>();
  EXPECT_GT(r[0]["device_calls"]["mem_create"].get<int>(), defaults);
  EXPECT_EQ(r[1]["device_calls"]["mem_create"].get<int>(), defaults);
}

// Spaces around a policy's name, settings and values are not part of them.
TEST(Cli, SpacesAroundPoliciesAndSettingsAreDropped) {
  EXPECT_EQ(parse_policy_list("vram, torch-native").at(1), "torch-native");
  EXPECT_EQ(parse_policy_list(" all ").size(), policies().size());
  EXPECT_NO_THROW(check_policy_settings({"vram : max_handle=16MiB"}));
  // A good setting the simulated H200 of the check cannot serve is for the command's own device to judge:
  // RMM's initial pool of 200 GiB on a simulated device of 256 GiB.
  const auto small = write_file("small.csv", small_trace);
  const outcome big = run("replay " + small + " --policy rmm-pool:initial_pool_size=200GiB --device sim:256GiB --json");
  ASSERT_EQ(big.code, 0) << big.out;
  EXPECT_EQ(nlohmann::json::parse(big.out)[0]["peak_reserved_bytes"], 200 * GiB);
  const auto path = write_file("small.csv", small_trace);
  const outcome o = run("replay " + path + " --policy 'vram: max_handle = 16MiB , cub-bins' --device sim --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto r = nlohmann::json::parse(o.out);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["policy"], "vram: max_handle = 16MiB");
  EXPECT_EQ(r[1]["policy"], "cub-bins");
}

// small: A and B of 3 MiB live at once. cuda-direct takes whole 2 MiB pages, 4 MiB each: on a device of
// 3 MiB, rounded up to two granules (4 MiB), A takes it all and B fails, so no device up to it fits.
TEST(Cli, FitOnNoDeviceTriedSaysSoAndExits3) {
  const auto path = write_file("small.csv", small_trace);
  const outcome t = run("fit " + path + " --policy cuda-direct --device sim:3MiB");
  EXPECT_EQ(t.code, 3) << t.out;
  EXPECT_NE(t.out.find("does not fit: small with cuda-direct fails even on the largest device tried, 4.00 MiB "
                       "(--device sim:MAX tries a larger one); its row is that replay, up to its first failed "
                       "allocation.\n"),
            std::string::npos)
      << t.out;
  const outcome j = run("fit " + path + " --policy cuda-direct --device sim:3MiB --json");
  EXPECT_EQ(j.code, 3) << j.out;
  const auto r = nlohmann::json::parse(j.out)[0];
  EXPECT_TRUE(r["fit_bytes"].is_null());
  EXPECT_EQ(r["max_device_bytes"], 4 * MiB);
  EXPECT_EQ(r["failed_allocations"], 1);
}

TEST(Cli, SizesBeyondGibibytesTakeTheirUnit) {
  EXPECT_EQ(format_bytes(1023 * GiB), "1023.00 GiB");
  EXPECT_EQ(format_bytes(1024 * GiB), "1.00 TiB");
  EXPECT_EQ(format_bytes(std::size_t{3} << 50), "3.00 PiB");
  EXPECT_EQ(format_bytes(~std::size_t{0}), "16.00 EiB");
}

TEST(Cli, UnmatchedAndDoubleFreesAreCountedInReplayAndRefusedByCheckAndConvert) {
  const auto path = write_file("frees.csv",
                               "time_us,action,addr,size,stream\n"
                               "0,alloc,4096,1024,0\n"
                               "1,free_requested,4096,1024,0\n"
                               "2,free_requested,4096,1024,0\n"   // double free: event 3
                               "3,free_requested,9999,512,0\n");  // never allocated: event 4
  const outcome replay = run("replay " + path + " --policy vram --device sim --json");
  ASSERT_EQ(replay.code, 0) << replay.out;
  EXPECT_NE(replay.out.find("double free(s), first at event 3 (free_requested of 1024 bytes at address 0x1000)"),
            std::string::npos) << replay.out;
  const auto json = nlohmann::json::parse(replay.out.substr(replay.out.find('[')));
  EXPECT_EQ(json[0]["unmatched_frees"], 2);
  // Each kind of problem on a line of its own that says it is a warning (before, the second had no "warning: ").
  EXPECT_THAT(replay.out, ::testing::HasSubstr("\nwarning: " + path + ": 1 double free(s), first at event 3"));
  // fit replays the trace as replay does, and says so as replay does (before, it said nothing).
  const outcome fit = run("fit " + path + " --policy vram");
  EXPECT_EQ(fit.code, 0) << fit.out;
  EXPECT_THAT(fit.out, ::testing::HasSubstr("warning: " + path + ": 1 free(s) of an address never allocated, first at "
                                            "event 4 (free_requested of 512 bytes at address 0x270f)\nwarning: " +
                                            path + ": 1 double free(s), first at event 3"));
  EXPECT_THAT(fit.out, ::testing::HasSubstr("warning: the replay skips unmatched and double frees"));
  const outcome check = run("check " + path);
  EXPECT_EQ(check.code, 1) << check.out;
  EXPECT_NE(check.out.find("never allocated, first at event 4"), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("the trace's frees and allocations do not match (see above)"), std::string::npos);
  const outcome convert = run("convert " + path + " -o " + write_file("out.vtrace", ""));
  EXPECT_EQ(convert.code, 1) << convert.out;
  EXPECT_NE(convert.out.find("--force"), std::string::npos) << convert.out;
}

TEST(Cli, CheckNamesDuplicateAllocsAndFreesOfAnotherSizeByEventNumber) {
  // Blank lines do not shift the event numbers: event 3 is on line 5 of this file.
  const auto path = write_file("sizes.csv",
                               "time_us,action,addr,size,stream\n"
                               "0,alloc,4096,1024,0\n"
                               "\n"
                               "1,alloc,4096,2048,0\n"            // event 2: an alloc at a live address
                               "\n"
                               "2,free_requested,4096,1000,0\n");  // event 3: freed with 1000, allocated 2048
  const outcome check = run("check " + path + " --json");
  EXPECT_EQ(check.code, 1) << check.out;
  EXPECT_NE(check.out.find("1 alloc(s) at an address still live, first at event 2 (alloc of 2048 bytes"),
            std::string::npos) << check.out;
  EXPECT_NE(check.out.find("1 free(s) with a size other than their alloc's, first at event 3 (free_requested of "
                           "1000 bytes at address 0x1000)"),
            std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("match no allocation"), std::string::npos) << check.out;
  const auto json = nlohmann::json::parse(check.out.substr(check.out.find('['), check.out.rfind(']') + 1 - check.out.find('[')));
  EXPECT_EQ(json[0]["wrong_size_frees"], 1);
  EXPECT_EQ(json[0]["duplicate_allocs"], 1);
  EXPECT_EQ(json[0]["clean"], false);
}

TEST(Cli, SimulateAndConvertSayWhatTheyWroteAsJson) {
  // alternating: 1000 allocations of 1 KiB, 500 frees, 500 allocations of 2 KiB, 500 frees, 500 frees: 3000
  // events, one a microsecond from 0, so 2999 us of trace time.
  const std::string out = (test_dir() / "alt.vtrace").string();
  outcome o = run("simulate alternating --seed 4 -o " + out + " --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(nlohmann::json::parse(o.out),
            (nlohmann::json{{"output", out}, {"workload", "alternating"}, {"seed", 4}, {"format", "vram"},
                            {"events", 3000}, {"trace_seconds", 0.002999}}));
  o = run("simulate inference --hours 0.01 -o " + (test_dir() / "inf.vtrace").string() + " --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(nlohmann::json::parse(o.out).at("hours"), 0.01);
  // The six rows of small_trace, to an RMM log: all six are allocations and frees, none left out.
  const std::string in = write_file("small.csv", small_trace), rmm = (test_dir() / "small.rmm.csv").string();
  o = run("convert " + in + " -o " + rmm + " --to rmm --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(nlohmann::json::parse(o.out),
            (nlohmann::json{{"input", in}, {"output", rmm}, {"format", "rmm"}, {"events_read", 6},
                            {"events_written", 6}, {"events_retimed", 0}, {"notes", nlohmann::json::array()}}));
  // vit_train's times are PyTorch's, from the epoch: as times of day, every row of its RMM log reads back at
  // another time, and the JSON says so as the line does.
  const std::string vit = std::string(VRAM_TEST_DATA) + "/../../examples/traces/vit_train.csv.gz";
  o = run("convert " + vit + " -o " + (test_dir() / "vit.rmm.csv").string() + " --to rmm --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto vj = nlohmann::json::parse(o.out);
  EXPECT_GT(vj.at("events_written").get<std::size_t>(), 0u);
  EXPECT_EQ(vj.at("events_retimed"), vj.at("events_written"));
}

TEST(Cli, SimulateWritesATraceThatReplays) {
  const auto out = (test_dir() / "alt.vtrace").string();
  const outcome sim = run("simulate alternating -o " + out);
  ASSERT_EQ(sim.code, 0) << sim.out;
  // 1000 allocs of 1 KiB, 500 frees, 500 allocs of 2 KiB, then 500 + 500 frees: 3000 rows.
  EXPECT_NE(sim.out.find("3000 events"), std::string::npos) << sim.out;
  const outcome replay = run("replay " + out + " --policy vram --device sim --json");
  ASSERT_EQ(replay.code, 0) << replay.out;
  const auto r = nlohmann::json::parse(replay.out)[0];
  EXPECT_EQ(r["events"], 3000);
  // Live peaks after the 500 x 2 KiB arrive beside the 500 odd 1 KiB blocks: 500 KiB + 1000 KiB.
  EXPECT_EQ(r["peak_live_bytes"], 1500 * KiB);
}

TEST(Cli, SizesPoliciesAndDevicesParse) {
  EXPECT_EQ(parse_size("80GiB"), 80 * GiB);
  EXPECT_EQ(parse_size("1.5MiB"), 3 * MiB / 2);
  EXPECT_EQ(parse_size("2MB"), 2000000u);
  EXPECT_THROW(parse_size("-1"), usage_error);
  EXPECT_THROW(parse_size("12 parsecs"), usage_error);
  EXPECT_EQ(parse_policy_list("vram,torch-native:max_split_size_mb=128").size(), 2u);
  EXPECT_EQ(parse_policy_list("all").size(), policies().size());
  EXPECT_THROW(parse_policy_list("vram,,cub-bins"), usage_error);
  EXPECT_EQ(*parse_device_spec("sim:80GiB").capacity, 80 * GiB);
  EXPECT_EQ(parse_device_spec("cuda:1").index, 1);
  EXPECT_THROW(parse_device_spec("sim:0"), usage_error);
  // 63 TiB is the most a simulated device holds: more is a bad device here, not at its first use.
  EXPECT_EQ(*parse_device_spec("sim:63TiB").capacity, std::size_t{63} << 40);
  EXPECT_THROW(parse_device_spec("sim:100TiB"), usage_error);
  EXPECT_THROW(parse_device_spec("cuda:x"), usage_error);
  EXPECT_FALSE(parse_device_spec("sim:80GiB").lent_costs);
  EXPECT_TRUE(parse_device_spec("sim:costs=lent").lent_costs);
  EXPECT_FALSE(parse_device_spec("sim:costs=lent").capacity.has_value());
  const auto both = parse_device_spec("sim:80GiB,costs=lent");
  EXPECT_EQ(*both.capacity, 80 * GiB);
  EXPECT_TRUE(both.lent_costs);
  EXPECT_FALSE(parse_device_spec("sim:costs=table").lent_costs);
  EXPECT_THROW(parse_device_spec("sim:costs=fast"), usage_error);  // a model's name, or a FILE.json
  EXPECT_EQ(parse_device_spec("sim:costs=card.json").costs_file, "card.json");
  EXPECT_THROW(parse_device_spec("sim:80GiB,90GiB"), usage_error);
  for (const char* empty : {"sim:80GiB,", "sim:,80GiB", "sim:80GiB,,lag=5ms"}) {
    try {
      parse_device_spec(empty);
      ADD_FAILURE() << empty << " was taken";
    } catch (const usage_error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("an empty part before, between or after its commas")) << empty;
    }
  }
  EXPECT_THAT(run("info --device sim:").out, ::testing::HasSubstr("bad device 'sim:': nothing after 'sim:'"));
  // 63 TiB of capacity below the simulated mappings' addresses; a pool there reserves less than 8x per zone.
  const outcome too_large = run("info --device sim:64TiB");
  EXPECT_EQ(too_large.code, 2);
  EXPECT_THAT(too_large.out, ::testing::HasSubstr("a simulated device holds at most 63.00 TiB: 64.00 TiB is more"));
  EXPECT_EQ(sim_options(parse_device_spec("sim:costs=lent")).label, "simulated H200 (lent H200 costs)");
}

TEST(CliParse, DurationsTakeTheirUnit) {
  EXPECT_EQ(parse_duration_ns("5ms"), 5'000'000);
  EXPECT_EQ(parse_duration_ns("250us"), 250'000);
  EXPECT_EQ(parse_duration_ns("1.5s"), 1'500'000'000);
  EXPECT_EQ(parse_duration_ns("100ns"), 100);
  EXPECT_EQ(parse_duration_ns("0ms"), 0);
  EXPECT_EQ(parse_duration_ns("0"), 0);
  for (const char* bad : {"5", "0.5", "-1ms", "ms", "", "5 parsecs", "1e3ms", "99999999999s"})
    EXPECT_THROW(parse_duration_ns(bad), usage_error) << bad;
}

TEST(CliParse, ASimulatedDeviceMayRunBehindTheHost) {
  EXPECT_FALSE(parse_device_spec("sim").lag_ns.has_value());
  EXPECT_EQ(sim_options(parse_device_spec("sim")).lag_ns, 0);
  const auto lag = parse_device_spec("sim:lag=5ms");
  EXPECT_EQ(*lag.lag_ns, 5'000'000);
  EXPECT_FALSE(lag.capacity.has_value());
  EXPECT_EQ(sim_options(lag).lag_ns, 5'000'000);
  EXPECT_EQ(sim_options(lag).label, "simulated H200, 5 ms behind the host");
  const auto all = parse_device_spec("sim:80GiB,costs=lent,lag=250us");
  EXPECT_EQ(*all.capacity, 80 * GiB);
  EXPECT_TRUE(all.lent_costs);
  EXPECT_EQ(*all.lag_ns, 250'000);
  EXPECT_EQ(sim_options(all).label, "simulated device (lent H200 costs), 250 us behind the host");
  EXPECT_EQ(sim_options(parse_device_spec("sim:lag=1500us")).label, "simulated H200, 1.5 ms behind the host");
  EXPECT_EQ(sim_options(parse_device_spec("sim:lag=0ms")).label, "simulated H200");
  for (const char* bad : {"sim:lag=5", "sim:lag=-1ms", "sim:lag=5ms,lag=1ms", "sim:lag=", "auto:lag=5ms"})
    EXPECT_THROW(parse_device_spec(bad), usage_error) << bad;
}

// `vram probe --costs FILE` on the simulated device writes the model the device runs under: the table's
// cuMemSetAccess at 64 MiB is halfway (in log2) between its 32 MiB and 128 MiB points, (38 + 33) / 2 = 35.5 us.
// --json prints what the file holds.
TEST(Cli, ProbeCostsWritesTheDevicesModel) {
  const auto path = (test_dir() / "costs.json").string();
  const outcome o = run("probe --costs " + path + " --device sim --rounds 2 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto printed = nlohmann::json::parse(o.out);
  std::ifstream in(path);
  const auto written = nlohmann::json::parse(in);
  EXPECT_EQ(printed, written);
  EXPECT_EQ(written["format"], "vram cost model");
  EXPECT_EQ(written["simulated"], true);
  EXPECT_EQ(written["rounds"], 2);
  EXPECT_EQ(written["samples"].size(), 6u * 7 + 5 * 2 + 7);
  EXPECT_EQ(written["curves"]["set_access"][3], nlohmann::json({64 * MiB, 35'500.0}));
  EXPECT_EQ(written["curves"]["legacy_malloc"][0], nlohmann::json({2 * MiB, 42'300.0}));
}

// --device sim:costs=FILE replays under the file's model. With every call free but cudaMalloc (100 us) and
// cudaFree (50 us), the small trace's three blocks under cuda-direct cost 3 x 100 + 3 x 50 = 450 us.
TEST(Cli, ReplayUnderACostModelFile) {
  const auto path = (test_dir() / "costs.json").string();
  ASSERT_EQ(run("probe --costs " + path + " --device sim --rounds 1").code, 0);
  nlohmann::json model;
  std::ifstream(path) >> model;
  for (auto& [kind, curve] : model["curves"].items()) curve = nlohmann::json::array({{1, 0}});
  model["curves"]["legacy_malloc"] = {{1, 100'000}};
  model["curves"]["legacy_free"] = {{1, 50'000}};
  const auto edited = write_file("edited.json", model.dump());
  const auto trace = write_file("small.csv", small_trace);
  const outcome o = run("replay " + trace + " --policy cuda-direct --device sim:costs=" + edited + " --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto r = nlohmann::json::parse(o.out)[0];
  EXPECT_EQ(r["device_calls"]["legacy_malloc"], 3);
  EXPECT_DOUBLE_EQ(r["modelled_driver_seconds"].get<double>(), 450e-6);
}

TEST(Cli, ProbeCostsRefusesAFileItCannotWriteBeforeMeasuring) {
  const outcome o = run("probe --costs /nonexistent/folder/costs.json --device sim");
  EXPECT_NE(o.code, 0);
  EXPECT_THAT(o.out, ::testing::HasSubstr("/nonexistent/folder/costs.json: cannot create"));
  EXPECT_THAT(o.out, ::testing::Not(::testing::HasSubstr("call ")));  // no table: nothing was measured
  const outcome txt = run("probe --costs costs.txt --device sim");  // sim:costs= would not take it
  EXPECT_EQ(txt.code, 2);
  EXPECT_THAT(txt.out, ::testing::HasSubstr("--costs costs.txt: the file's name must end in .json"));
  EXPECT_EQ(run("probe --rounds 3 --device sim").code, 2);  // --rounds without --costs means nothing
  // Options the form in use would ignore are refused, as are values given empty and a step nothing can take.
  EXPECT_THAT(run("probe --costs c.json --no-total --device sim").out, ::testing::HasSubstr("--costs excludes --no-total"));
  EXPECT_THAT(run("probe --snapshot s.json --step 2MiB").out, ::testing::HasSubstr("--snapshot excludes --step"));
  EXPECT_THAT(run("probe --snapshot s.json --device sim").out, ::testing::HasSubstr("--device excludes --snapshot"));
  for (const char* option : {"--costs", "--snapshot", "--step"}) {
    const outcome empty = run(std::string("probe ") + option + " ''");
    EXPECT_EQ(empty.code, 2) << option;
    EXPECT_THAT(empty.out, ::testing::HasSubstr(std::string(option) + ": was given no value (vram probe --help)"));
  }
  for (const char* step : {"0", "4MiB"}) {
    const outcome o = run(std::string("probe --device sim:2MiB --step ") + step);
    EXPECT_EQ(o.code, 2) << step;
    EXPECT_THAT(o.out, ::testing::HasSubstr(std::string("probe: --step ") + step +
                                            " must be above 0 and at most the device's free memory, 2.00 MiB"));
  }
  const outcome bad = run("replay " + write_file("small.csv", small_trace) + " --device sim:costs=/nonexistent/c.json");
  EXPECT_NE(bad.code, 0);
  EXPECT_THAT(bad.out, ::testing::HasSubstr("/nonexistent/c.json: cannot open the cost model"));
}

}  // namespace
}  // namespace vram
