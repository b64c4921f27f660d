// libvram_record.so: `vram record`'s recorder, loaded into an unmodified CUDA program by the CUDA driver
// itself through CUDA_INJECTION64_PATH, the mechanism CUDA's own tools use. It asks CUPTI for
//  - the memory activity records (CUPTI_ACTIVITY_KIND_MEMORY2): every device-memory allocation and release
//    whatever made it (cudaMalloc, cudaMallocAsync and memory pools, cuMemAlloc, ...), with its time,
//    address, size, device and stream;
//  - the driver's cuMemMap / cuMemUnmap calls (virtual memory: PyTorch's expandable segments), with their
//    address and size, on return and only when they succeeded. CUPTI also reports mapped memory as memory
//    records (an allocation at the mapped address, while it is mapped); to_traces leaves those out, so that
//    a mapping is one segment_map and no alloc;
// and at exit writes them as vram traces (src/vram/record/memory_ops.hpp), one file per device, to
// VRAM_RECORD_OUTPUT. A process other than the one `vram record` started (one the program starts in turn)
// writes to "<output>.pid<N>" instead, so that no recording overwrites another.
#include <cupti.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "vram/record/memory_ops.hpp"
#include "vram/trace/trace_io.hpp"
#include "vram/trace/trace_recorder.hpp"

namespace {

constexpr std::size_t buffer_bytes = 8u << 20;

struct recorder_state {
  std::mutex mutex;
  std::vector<vram::memory_op> ops;
  std::string output;
  std::uint64_t skipped_other_memory = 0;  // host, pinned and managed allocations: not device memory
  bool written = false;
};

recorder_state& state() {
  static auto* s = new recorder_state;  // never destroyed: CUPTI may call back while the process exits
  return *s;
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes));
  *size = *buffer == nullptr ? 0 : buffer_bytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  std::vector<vram::memory_op> got;
  std::uint64_t skipped = 0;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_MEMORY2) continue;
    const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(record);
    if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE || m->address == 0) {
      ++skipped;
      continue;
    }
    vram::memory_op op;
    if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
      op.what = vram::memory_op::kind::allocate;
    else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
      op.what = vram::memory_op::kind::release;
    else
      continue;
    op.timestamp_ns = m->timestamp;
    op.device = m->deviceId;
    op.address = m->address;
    op.bytes = m->bytes;
    op.stream = m->streamId == CUPTI_INVALID_STREAM_ID ? 0 : m->streamId;
    got.push_back(op);
  }
  std::free(buffer);
  auto& s = state();
  const std::lock_guard lock(s.mutex);
  s.ops.insert(s.ops.end(), got.begin(), got.end());
  s.skipped_other_memory += skipped;
}

void CUPTIAPI on_driver_call(void*, CUpti_CallbackDomain, CUpti_CallbackId id, const void* data) {
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_EXIT) return;
  if (cb->functionReturnValue != nullptr && *static_cast<const CUresult*>(cb->functionReturnValue) != CUDA_SUCCESS)
    return;
  vram::memory_op op;
  cuptiGetTimestamp(&op.timestamp_ns);
  std::uint32_t device = 0;
  if (cb->context != nullptr && cuptiGetDeviceId(cb->context, &device) == CUPTI_SUCCESS) op.device = device;
  if (id == CUPTI_DRIVER_TRACE_CBID_cuMemMap) {
    const auto* p = static_cast<const cuMemMap_params*>(cb->functionParams);
    op.what = vram::memory_op::kind::map;
    op.address = p->ptr;
    op.bytes = p->size;
  } else if (id == CUPTI_DRIVER_TRACE_CBID_cuMemUnmap) {
    const auto* p = static_cast<const cuMemUnmap_params*>(cb->functionParams);
    op.what = vram::memory_op::kind::unmap;
    op.address = p->ptr;
    op.bytes = p->size;
  } else {
    return;
  }
  auto& s = state();
  const std::lock_guard lock(s.mutex);
  s.ops.push_back(op);
}

void write_recording() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  auto& s = state();
  const std::lock_guard lock(s.mutex);
  if (s.written) return;
  s.written = true;
  try {
    std::string name = s.output;
    if (const auto slash = name.find_last_of('/'); slash != std::string::npos) name = name.substr(slash + 1);
    if (const auto dot = name.find('.', 1); dot != std::string::npos) name = name.substr(0, dot);
    const vram::recorded_traces traces = vram::to_traces(std::move(s.ops), name);
    for (const auto& [device, t] : traces.by_device)
      vram::write_trace(vram::device_recording_path(s.output, static_cast<int>(device)), t, vram::trace_format::vram);
    if (traces.unmatched_releases > 0)
      std::fprintf(stderr, "vram record: %llu releases of memory allocated before the recording began were left out\n",
                   static_cast<unsigned long long>(traces.unmatched_releases));
    if (s.skipped_other_memory > 0)
      std::fprintf(stderr, "vram record: %llu memory records of host, pinned or managed memory were not recorded\n",
                   static_cast<unsigned long long>(s.skipped_other_memory));
    if (traces.mapped_records > 0)
      std::fprintf(stderr, "vram record: %llu memory records of mapped memory are in the recording as its mappings\n",
                   static_cast<unsigned long long>(traces.mapped_records));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vram record: cannot write the recording: %s\n", e.what());
  }
}

}  // namespace

// Called by the CUDA driver when it initializes in a process with CUDA_INJECTION64_PATH set to this library.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* output = std::getenv("VRAM_RECORD_OUTPUT");
  if (output == nullptr || *output == '\0') {
    std::fprintf(stderr, "vram record: VRAM_RECORD_OUTPUT is not set; nothing is recorded\n");
    return 1;
  }
  auto& s = state();
  s.output = output;
  // vram record names itself: a process whose parent it is not was forked or started by the program.
  if (const char* parent = std::getenv("VRAM_RECORD_PARENT"); parent != nullptr && std::atol(parent) != ::getppid())
    s.output = vram::process_recording_path(output, ::getpid());
  bool ok = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS &&
            cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2) == CUPTI_SUCCESS;
  CUpti_SubscriberHandle subscriber{};
  ok = ok && cuptiSubscribe(&subscriber, on_driver_call, nullptr) == CUPTI_SUCCESS &&
       cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemMap) == CUPTI_SUCCESS &&
       cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap) == CUPTI_SUCCESS;
  if (!ok) {
    std::fprintf(stderr, "vram record: CUPTI refused to record (another profiler attached?); nothing is recorded\n");
    return 1;
  }
  std::atexit(write_recording);
  return 1;
}
