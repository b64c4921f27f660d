// The C API's recording: pool calls and their events under one mutex, one trace file per device.
#include "vram/capi/recording.hpp"

#include <fmt/format.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "vram/core/error.hpp"

namespace vram::capi {

std::atomic<recording*> active_recording{nullptr};

namespace {

std::mutex start_mutex;  // serializes start and stop

/// Every recording started, kept for the life of the process (a thread may still hold a stopped one); a
/// list that is itself never destroyed, so the recordings stay reachable and no leak checker counts them.
std::vector<std::unique_ptr<recording>>& all_recordings() {
  static auto* const list = new std::vector<std::unique_ptr<recording>>();
  return *list;
}

void stop_at_exit() {
  try {
    stop_recording();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vram: the recording could not be written at exit: %s\n", e.what());
  }
}

}  // namespace

recording::recording(std::string path) : path_(std::move(path)), start_(std::chrono::steady_clock::now()) {
  if (path_.empty()) throw usage_error("the recording's path is empty; name the trace file to write");
  if (const std::string why = recording_name_problem(path_); !why.empty()) throw usage_error(why);
  try {
    try {
      files_[0] = std::make_unique<trace_recorder>(path_);
    } catch (const recording_busy&) {
      // Another process records there (a worker, a rank, a subprocess that inherited VRAM_RECORD): this one
      // records beside it, as vram record names the processes a program starts.
      const std::string mine = process_recording_path(path_, ::getpid());
      std::fprintf(stderr, "vram: another process is recording to %s; this one (pid %d) records to %s\n",
                   path_.c_str(), static_cast<int>(::getpid()), mine.c_str());
      path_ = mine;
      files_[0] = std::make_unique<trace_recorder>(path_);
    }
  } catch (const error& e) {
    throw usage_error(e.what());
  }
  flusher_ = std::thread([this] { flush_every_second(); });
}

void recording::flush_every_second() {
  std::unique_lock lock(mutex_);
  while (!stopped_) {
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopped_; });
    if (stopped_ || !open_) continue;
    try {
      for (auto& f : files_)
        if (f) f->flush();
    } catch (const std::exception& e) {
      fail(e);
    }
  }
}

void recording::fail(const std::exception& e) {
  open_ = false;
  failure_ = e.what();
  std::fprintf(stderr, "vram: the recording to %s stopped: %s; the program goes on unrecorded\n", path_.c_str(),
               e.what());
}

void recording::abandon_in_child() noexcept {
  open_ = false;
  stopped_ = true;  // the flusher thread is the parent's: the child has none
  for (auto& f : files_)
    if (f) f->abandon();
}

std::string recording::device_path(const std::string& path, int device) {
  return device_recording_path(path, device);
}

void recording::record(int device, trace_action action, device_ptr p, std::size_t size, stream_id stream) noexcept {
  if (!open_) return;
  try {
    auto& file = files_[static_cast<std::size_t>(device)];
    if (!file) file = std::make_unique<trace_recorder>(device_path(path_, device));
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start_);
    file->record({us.count(), p, size, stream, action});
  } catch (const std::exception& e) {
    fail(e);  // the call it records has been made: it stands, and the program goes on
  }
}

device_ptr recording::allocate(pool_table& table, int device, std::size_t size, stream_id stream) {
  std::lock_guard lock(mutex_);
  pool_resource& pool = table.pool(device);
  try {
    const device_ptr p = pool.allocate(size, stream);
    record(device, trace_action::alloc, p, size, stream);
    return p;
  } catch (const out_of_memory&) {
    record(device, trace_action::oom, 0, size, stream);
    throw;
  }
}

void recording::deallocate(pool_table& table, int device, device_ptr p, std::size_t size, stream_id stream) {
  std::lock_guard lock(mutex_);
  table.pool(device).deallocate(p, size, stream);
  record(device, trace_action::free_requested, p, size, stream);
}

void recording::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  std::lock_guard lock(mutex_);
  open_ = false;
  std::string failures = failure_;
  for (auto& f : files_) {
    if (!f) continue;
    try {
      f->flush();
    } catch (const error& e) {
      if (failures.find(e.what()) == std::string::npos)
        failures += failures.empty() ? e.what() : fmt::format("; {}", e.what());
    }
    f.reset();
  }
  if (!failures.empty()) throw error(failures);
}

namespace {

// fork(): the child of a recording process gets a copy of the recording and its open files. Its events are
// not the parent's, and its exit would flush the parent's buffered events into the parent's file a second
// time, so the child lets the files go unwritten and is not recorded. The parent's mutexes are held across
// the fork, so the child's copy of the recording is whole.
void before_fork() {
  start_mutex.lock();
  if (recording* r = active_recording.load(std::memory_order_acquire)) r->lock();
}
void after_fork_in_parent() {
  if (recording* r = active_recording.load(std::memory_order_acquire)) r->unlock();
  start_mutex.unlock();
}
void after_fork_in_child() {
  if (recording* r = active_recording.exchange(nullptr, std::memory_order_acq_rel)) {
    r->abandon_in_child();
    r->unlock();
  }
  start_mutex.unlock();
}

}  // namespace

void start_recording(const char* path) {
  static const bool fork_handled = ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
  (void)fork_handled;
  std::lock_guard lock(start_mutex);
  if (const recording* r = active_recording.load(std::memory_order_acquire))
    throw usage_error(fmt::format("a recording to {} is under way; stop it first (vram_record_stop)", r->path()));
  static const bool registered = std::atexit(stop_at_exit) == 0;
  (void)registered;
  auto& list = all_recordings();
  list.push_back(std::make_unique<recording>(path == nullptr ? std::string() : std::string(path)));
  active_recording.store(list.back().get(), std::memory_order_release);
}

void stop_recording() {
  std::lock_guard lock(start_mutex);
  if (recording* r = active_recording.exchange(nullptr, std::memory_order_acq_rel)) r->stop();
}

}  // namespace vram::capi
