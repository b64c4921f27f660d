// The C API's recording (vram_record_start / vram_record_stop, VRAM_RECORD), its peak reset, and the
// trace_recorder under it, on simulated devices of 64 MiB with threads' caches off (VRAM_THREAD_CACHE=0), so
// every figure below follows from the calls alone. Sizes round up to 512 bytes: 1000 -> 1024.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vram/capi/recording.hpp"
#include "vram/device/sim_device.hpp"
#include "vram/pool/pool_resource.hpp"
#include "vram/replay/replay.hpp"
#include "vram/trace/file_io.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/trace/trace_recorder.hpp"
#include "vram/trace/vram_format.hpp"
#include "vram/vram.h"

namespace {

using ::testing::HasSubstr;

const bool environment_set = [] {
  setenv("VRAM_DEVICE", "sim:64MiB", 1);
  setenv("VRAM_THREAD_CACHE", "0", 1);
  unsetenv("VRAM_RECORD");
  unsetenv("VRAM_LIMIT");
  return true;
}();

constexpr std::size_t MiB = std::size_t{1} << 20;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / fmt::format("vram-{}-{}", ::getpid(), name)).string();
}

void* stream(std::uintptr_t id) { return reinterpret_cast<void*>(id); }

vram_stats stats_of(int device) {
  vram_stats s{};
  EXPECT_EQ(vram_get_stats(device, &s), VRAM_SUCCESS) << vram_last_error();
  return s;
}

// ---- peaks ------------------------------------------------------------------------------------------------

TEST(capi_peaks, reset_sets_the_peaks_to_the_current_figures) {
  ASSERT_TRUE(environment_set);
  void* a = vram_malloc(3 * MiB, 1, nullptr);
  void* b = vram_malloc(MiB, 1, nullptr);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  vram_free(a, 3 * MiB, 1, nullptr);
  vram_stats s = stats_of(1);
  EXPECT_EQ(s.allocated_bytes, MiB);
  EXPECT_EQ(s.peak_allocated_bytes, 4 * MiB);
  const std::size_t peak_reserved = s.peak_reserved_bytes;
  EXPECT_GE(peak_reserved, 4 * MiB);

  ASSERT_EQ(vram_trim(1, nullptr), VRAM_SUCCESS);  // the 3 MiB go back: reserved falls below its peak
  s = stats_of(1);
  ASSERT_LT(s.reserved_bytes, peak_reserved);
  ASSERT_EQ(vram_reset_peak_stats(1), VRAM_SUCCESS);
  s = stats_of(1);
  EXPECT_EQ(s.peak_allocated_bytes, MiB);
  EXPECT_EQ(s.peak_reserved_bytes, s.reserved_bytes);
  vram_free(b, MiB, 1, nullptr);
  EXPECT_EQ(vram_last_error_code(), VRAM_SUCCESS);
  EXPECT_EQ(stats_of(1).peak_allocated_bytes, MiB);  // a free does not raise a peak
}

TEST(capi_peaks, reset_on_a_bad_device_is_an_error) {
  EXPECT_EQ(vram_reset_peak_stats(8), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr("vram_reset_peak_stats(device=8): device 8 is out of range"));
}

TEST(capi_stats, driver_calls_count_the_handles_made_and_mapped) {
  // Device 2 starts empty: one 3 MiB block needs memory from the device, so at least one handle is made and
  // mapped; a trim gives every handle back.
  void* p = vram_malloc(3 * MiB, 2, nullptr);
  ASSERT_NE(p, nullptr);
  vram_stats s = stats_of(2);
  EXPECT_GE(s.handles_created, 1u);
  EXPECT_EQ(s.maps, s.handles_created);  // no alias on a roomy device: one view a handle
  EXPECT_EQ(s.unmaps, 0u);
  EXPECT_EQ(s.handles_released, 0u);
  EXPECT_EQ(s.alloc_retries, 0u);
  vram_free(p, 3 * MiB, 2, nullptr);
  ASSERT_EQ(vram_trim(2, nullptr), VRAM_SUCCESS);
  s = stats_of(2);
  EXPECT_EQ(s.handles_released, s.handles_created);
  EXPECT_EQ(s.unmaps, s.maps);
  EXPECT_EQ(s.reserved_bytes, 0u);
}

// ---- recording ---------------------------------------------------------------------------------------------

TEST(capi_recording, device_files_are_named_before_the_first_extension) {
  using vram::capi::recording;
  EXPECT_EQ(recording::device_path("run.vram", 0), "run.vram");
  EXPECT_EQ(recording::device_path("run.vram", 1), "run.dev1.vram");
  EXPECT_EQ(recording::device_path("/tmp/a.b/run", 3), "/tmp/a.b/run.dev3");
  EXPECT_EQ(recording::device_path("out/.hidden", 2), "out/.hidden.dev2");
  EXPECT_EQ(recording::device_path("x.tar.vram", 7), "x.dev7.tar.vram");
}

TEST(capi_recording, records_every_call_that_reached_the_pool_in_order) {
  const std::string path = temp_path("rec.vram");
  const std::string path3 = vram::capi::recording::device_path(path, 3);
  ASSERT_EQ(vram_record_start(path.c_str()), VRAM_SUCCESS) << vram_last_error();

  void* a = vram_malloc(1000, 0, nullptr);
  void* b = vram_malloc(3 * MiB, 0, stream(7));
  vram_free(a, 1000, 0, nullptr);
  EXPECT_EQ(vram_malloc(128 * MiB, 0, nullptr), nullptr);  // more than the device: an oom row
  vram_free(a, 1000, 0, nullptr);                          // a double free: refused, so not recorded
  EXPECT_EQ(vram_last_error_code(), VRAM_ERROR_INVALID_ARGUMENT);
  void* c = vram_malloc(2 * MiB, 3, nullptr);
  vram_free(c, 2 * MiB, 3, nullptr);
  vram_free(b, 3 * MiB, 0, stream(7));
  ASSERT_EQ(vram_record_stop(), VRAM_SUCCESS) << vram_last_error();
  void* after = vram_malloc(1000, 0, nullptr);  // after the stop: not recorded
  vram_free(after, 1000, 0, nullptr);

  const vram::trace t0 = vram::read_trace(path);
  ASSERT_EQ(t0.events.size(), 5u);
  using vram::trace_action;
  const auto addr = [](void* p) { return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p)); };
  const std::vector<std::tuple<trace_action, std::uint64_t, std::uint64_t, std::uint64_t>> expected = {
      {trace_action::alloc, addr(a), 1000, 0},
      {trace_action::alloc, addr(b), 3 * MiB, 7},
      {trace_action::free_requested, addr(a), 1000, 0},
      {trace_action::oom, 0, 128 * MiB, 0},
      {trace_action::free_requested, addr(b), 3 * MiB, 7},
  };
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = t0.events[i];
    EXPECT_EQ(std::tuple(e.action, e.addr, e.size, e.stream), expected[i]) << "event " << i;
    if (i > 0) EXPECT_GE(e.time_us, t0.events[i - 1].time_us);
  }
  const vram::trace t3 = vram::read_trace(path3);
  ASSERT_EQ(t3.events.size(), 2u);
  EXPECT_EQ(t3.events[0].action, trace_action::alloc);
  EXPECT_EQ(t3.events[0].size, 2 * MiB);
  EXPECT_EQ(t3.events[1].action, trace_action::free_requested);

  // Replayed, the recording holds what the program held: 1000 + 3 MiB at once, at most.
  vram::sim_device dev;
  vram::pool_resource pool(dev);
  const vram::replay_result r = vram::replay(t0, pool);
  EXPECT_EQ(r.peak_live_bytes, 1000 + 3 * MiB);
  EXPECT_EQ(r.allocations, 2u);  // the oom row is what the recorded pool refused, not a request to replay
  std::filesystem::remove(path);
  std::filesystem::remove(path3);
}

TEST(capi_recording, bad_starts_are_errors_that_say_why) {
  EXPECT_EQ(vram_record_start(nullptr), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr("path is empty"));
  EXPECT_EQ(vram_record_start("run.vram.gz"), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr("run.vram.gz: a recording is written in vram's format, uncompressed, as it runs; "
                                  "name a .vram file, and compress it afterwards"));
  // Any case, and a CSV name too: the file would be vram's format under a name that says otherwise.
  EXPECT_EQ(vram_record_start("run.vram.GZ"), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(vram_record_start("run.csv"), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr("run.csv: a recording is written in vram's format, uncompressed, as it runs; "
                                  "name a .vram file, and convert it afterwards"));
  EXPECT_EQ(vram_record_start("/nonexistent-folder/run.vram"), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr("/nonexistent-folder/run.vram: cannot create"));

  const std::string path = temp_path("twice.vram");
  ASSERT_EQ(vram_record_start(path.c_str()), VRAM_SUCCESS);
  EXPECT_EQ(vram_record_start(path.c_str()), VRAM_ERROR_INVALID_ARGUMENT);
  EXPECT_THAT(vram_last_error(), HasSubstr(fmt::format("a recording to {} is under way", path)));
  EXPECT_EQ(vram_record_stop(), VRAM_SUCCESS);
  EXPECT_EQ(vram_record_stop(), VRAM_SUCCESS);  // none under way: nothing to do
  EXPECT_EQ(vram::read_trace(path).events.size(), 0u);  // a valid, empty trace
  std::filesystem::remove(path);
}

// A file another process records to (here a lock taken as a second recorder would take it) is left whole:
// this process records beside it, to PATH.pidN, and says so.
TEST(capi_recording, a_file_another_process_records_to_is_left_whole) {
  const std::string path = temp_path("busy.vram");
  const std::string mine = fmt::format("{}.pid{}", path, ::getpid());
  {
    std::ofstream(path) << "theirs";
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ::testing::internal::CaptureStderr();
  const int started = vram_record_start(path.c_str());
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(started, VRAM_SUCCESS) << vram_last_error();
  EXPECT_EQ(said, fmt::format("vram: another process is recording to {}; this one (pid {}) records to {}\n", path,
                              ::getpid(), mine));
  void* a = vram_malloc(1000, 0, nullptr);
  vram_free(a, 1000, 0, nullptr);
  ASSERT_EQ(vram_record_stop(), VRAM_SUCCESS) << vram_last_error();
  ::close(fd);
  EXPECT_EQ(vram::detail::read_file_bytes(path), "theirs");
  const vram::trace t = vram::read_trace(mine);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].size, 1000u);
  std::filesystem::remove(path);
  std::filesystem::remove(mine);
}

// A child that fork() made, and that ends through exit(), writes nothing into its parent's recording: the
// parent's file holds the parent's calls alone, whole, although the child's copy held an unwritten event.
TEST(capi_recording, a_forked_child_leaves_the_parents_file_alone) {
  const std::string path = temp_path("fork.vram");
  ASSERT_EQ(vram_record_start(path.c_str()), VRAM_SUCCESS) << vram_last_error();
  void* a = vram_malloc(1000, 0, nullptr);  // buffered, not yet in the file
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    void* b = vram_malloc(2048, 0, nullptr);
    vram_free(b, 2048, 0, nullptr);
    std::exit(0);  // exit handlers run: the recording's among them
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  vram_free(a, 1000, 0, nullptr);
  ASSERT_EQ(vram_record_stop(), VRAM_SUCCESS) << vram_last_error();
  const vram::trace t = vram::read_trace(path);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[0].action, vram::trace_action::alloc);
  EXPECT_EQ(t.events[0].size, 1000u);
  EXPECT_EQ(t.events[1].action, vram::trace_action::free_requested);
  std::filesystem::remove(path);
}

// A recording that cannot be written (here a file-size limit of 4 KiB, in a child process) stops, and the
// program does not: every allocation and free goes on as without it, the reason is said once, and
// vram_record_stop() reports it. The file holds the trace of its last good flush.
TEST(capi_recording, a_recording_that_cannot_be_written_stops_but_the_program_goes_on) {
  const std::string path = temp_path("full.vram");
  const std::string said = temp_path("full.stderr");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (std::freopen(said.c_str(), "w", stderr) == nullptr) ::_exit(10);
    std::setvbuf(stderr, nullptr, _IONBF, 0);  // as stderr is: each message out at once, _exit or not
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit four_kib{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &four_kib) != 0) ::_exit(11);
    if (vram_record_start(path.c_str()) != VRAM_SUCCESS) ::_exit(12);
    // 300,000 pairs of 3-8 bytes each: the 1 MiB buffer fills, and its write fails past 4 KiB.
    for (int i = 0; i < 300000; ++i) {
      void* p = vram_malloc(4096, 5, nullptr);
      if (p == nullptr) ::_exit(13);
      vram_free(p, 4096, 5, nullptr);
    }
    const int stopped = vram_record_stop();
    const bool says_why = std::string(vram_last_error()).find("File too large") != std::string::npos;
    vram_stats st{};
    if (vram_get_stats(5, &st) != VRAM_SUCCESS || st.allocated_bytes != 0) ::_exit(14);
    ::_exit(stopped != VRAM_SUCCESS ? (says_why ? 0 : 15) : 16);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string err = vram::detail::read_file_bytes(said);
  const std::string dev5 = vram::capi::recording::device_path(path, 5);  // device 5's file
  EXPECT_THAT(err, HasSubstr("vram: the recording to " + path + " stopped: " + dev5 + ": cannot write: File too large; "
                             "the program goes on unrecorded\n"));
  EXPECT_EQ(err.find("stopped:"), err.rfind("stopped:"));  // said once
  EXPECT_NO_THROW(vram::read_trace(dev5));
  std::filesystem::remove(path);
  std::filesystem::remove(dev5);
  std::filesystem::remove(said);
}

// A process that goes idle has its events written within a second, without a later event or a stop: one
// killed while idle loses nothing older than that.
TEST(capi_recording, an_idle_process_has_its_events_written_within_a_second) {
  const std::string path = temp_path("idle.vram");
  ASSERT_EQ(vram_record_start(path.c_str()), VRAM_SUCCESS) << vram_last_error();
  void* a = vram_malloc(1000, 0, nullptr);
  EXPECT_EQ(vram::read_trace(path).events.size(), 0u);  // buffered
  ::usleep(1'500'000);
  EXPECT_EQ(vram::read_trace(path).events.size(), 1u);  // written by the recording's own thread
  vram_free(a, 1000, 0, nullptr);
  ASSERT_EQ(vram_record_stop(), VRAM_SUCCESS) << vram_last_error();
  EXPECT_EQ(vram::read_trace(path).events.size(), 2u);
  std::filesystem::remove(path);
}

// ---- trace_recorder ----------------------------------------------------------------------------------------

TEST(trace_recorder, the_file_is_a_valid_trace_after_every_flush) {
  const std::string path = temp_path("flush.vram");
  vram::trace all;
  {
    vram::trace_recorder rec(path, 64);  // a 64-byte buffer: written out every dozen events or so
    std::uint64_t seen_in_file = 0;
    for (int i = 0; i < 200; ++i) {
      const vram::trace_event e{i * 3, 0x7f0000000000u + static_cast<std::uint64_t>(i % 17) * 4096,
                                static_cast<std::uint64_t>(512 * (1 + i % 5)), static_cast<std::uint64_t>(i % 2),
                                i % 2 == 0 ? vram::trace_action::alloc : vram::trace_action::free_requested};
      all.events.push_back(e);
      rec.record(e);
      const vram::trace now = vram::read_trace(path);  // parses (header and CRCs agree) at every moment
      ASSERT_LE(now.events.size(), all.events.size());
      ASSERT_GE(now.events.size(), seen_in_file);
      seen_in_file = now.events.size();
    }
    EXPECT_GT(seen_in_file, 150u);  // 200 events of 4-7 bytes through a 64-byte buffer: all but the last few
    rec.flush();
    // Once flushed, the file is exactly what the whole-trace writer makes of the same events.
    EXPECT_EQ(vram::detail::read_file_bytes(path), vram::detail::format_vram(all));
  }
  std::filesystem::remove(path);
}

TEST(trace_recorder, an_event_a_second_after_the_last_write_writes_the_buffer_out) {
  // A program that never fills the buffer and ends without exit handlers (os._exit) loses at most the events
  // of its last second: the event at 1 s after the last write takes every event before it to the file.
  const std::string path = temp_path("interval.vram");
  vram::trace_recorder rec(path);  // 1 MiB buffer, 1 s interval
  rec.record({0, 0x1000, 512, 0, vram::trace_action::alloc});
  EXPECT_EQ(vram::read_trace(path).events.size(), 0u);
  rec.record({999'999, 0x1000, 512, 0, vram::trace_action::free_requested});
  EXPECT_EQ(vram::read_trace(path).events.size(), 0u);
  rec.record({1'000'000, 0x2000, 512, 0, vram::trace_action::alloc});      // 1 s after the start: written
  EXPECT_EQ(vram::read_trace(path).events.size(), 3u);
  rec.record({1'500'000, 0x2000, 512, 0, vram::trace_action::free_requested});
  EXPECT_EQ(vram::read_trace(path).events.size(), 3u);
  rec.record({2'000'000, 0x3000, 512, 0, vram::trace_action::alloc});      // 1 s after the last write
  EXPECT_EQ(vram::read_trace(path).events.size(), 5u);
  std::filesystem::remove(path);
}

// In a child process (so the limit stays there), under a file-size limit of 4 KiB and with SIGXFSZ as
// @p on_limit: records events to @p path through a 1,000-byte buffer (a write every 1,000 bytes or so) until a
// write fails. The child exits 0 when the failure said "File too large". Returns its wait status.
int record_past_a_4_kib_limit(const std::string& path, void (*on_limit)(int)) {
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, on_limit);
    const rlimit four_kib{4096, 4096};
    if (::setrlimit(RLIMIT_FSIZE, &four_kib) != 0) ::_exit(2);
    try {
      vram::trace_recorder rec(path, 1000);
      for (int i = 0;; ++i) rec.record({i, 0x1000 + 4096 * static_cast<std::uint64_t>(i), 512, 0, vram::trace_action::alloc});
    } catch (const vram::error& e) {
      ::_exit(std::string(e.what()).find("cannot write: File too large") != std::string::npos ? 0 : 3);
    }
    ::_exit(4);
  }
  int status = -1;
  if (child < 0 || ::waitpid(child, &status, 0) != child) return -1;
  return status;
}

// A write that fails leaves the file the trace of the last flush that succeeded: no part of the failed buffer
// follows it.
TEST(trace_recorder, a_failed_write_leaves_the_trace_of_the_last_flush) {
  const std::string path = temp_path("limit.vram");
  const int status = record_past_a_4_kib_limit(path, SIG_IGN);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const vram::trace t = vram::read_trace(path);  // valid: header, payload and CRC agree
  EXPECT_GT(t.events.size(), 0u);
  EXPECT_LE(std::filesystem::file_size(path), 4096u);
  std::filesystem::remove(path);
}

// The same limit where the process does not ignore SIGXFSZ (any C program): the signal kills it inside its
// write, after part of the buffer went out and before the header was rewritten. The file then goes on past
// the payload its header gives: it reads as the trace of the last flush, with a note of the bytes left out.
TEST(trace_recorder, a_recording_killed_inside_a_write_reads_to_its_last_flush) {
  const std::string path = temp_path("killed.vram");
  const int status = record_past_a_4_kib_limit(path, SIG_DFL);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << status;
  EXPECT_EQ(std::filesystem::file_size(path), 4096u);  // cut at the limit, mid-write
  const std::vector<vram::trace> traces = vram::read_traces(path);
  ASSERT_EQ(traces.size(), 1u);
  EXPECT_GT(traces[0].events.size(), 0u);
  for (std::size_t i = 0; i < traces[0].events.size(); ++i) EXPECT_EQ(traces[0].events[i].addr, 0x1000 + 4096 * i);
  ASSERT_EQ(traces[0].notes.size(), 1u);
  EXPECT_THAT(traces[0].notes[0], HasSubstr("a recording cut off while it wrote"));
  std::filesystem::remove(path);
}

TEST(trace_recorder, a_time_that_goes_back_is_taken_as_the_one_before) {
  const std::string path = temp_path("back.vram");
  {
    vram::trace_recorder rec(path);
    rec.record({100, 0x1000, 512, 0, vram::trace_action::alloc});
    rec.record({40, 0x1000, 512, 0, vram::trace_action::free_requested});
  }
  const vram::trace t = vram::read_trace(path);
  ASSERT_EQ(t.events.size(), 2u);
  EXPECT_EQ(t.events[1].time_us, 100);
  std::filesystem::remove(path);
}

}  // namespace
