#pragma once
// Writing and checking a pattern in device memory, for the GPU tests (tests/gpu_test.cpp). Every block an
// allocator hands out is filled with words that depend on the block (its sequence number) and on the word's
// position; before the block is freed the whole of it is checked. Two live blocks that overlapped, or a
// block reused while other work still wrote it, leave words of the wrong pattern and are reported.
//
// Decisions:
//  - The fill and the check are kernels, loaded at run time from the PTX text below with cuModuleLoadDataEx
//    (the driver compiles it for the GPU it finds), so the build needs cuda.h alone and no CUDA compiler.
//    The PTX was produced by `nvcc -ptx -arch=compute_75 -O3` (CUDA 13.0) from the CUDA C in the comment
//    above it, with the comments and blank lines taken out and `.version` lowered to 7.0, which it needs
//    (sm_75, nanosleep); `ptxas -arch=sm_90` accepts it as written here.
//  - A check adds the count of wrong words to a counter of its own (a slot in a device array), so checks
//    queue on the stream without waiting; collect() waits for the stream once and reads every slot.
//  - Where the driver refuses the module (no JIT compiler, a PTX version it does not know), the checker
//    falls back to cuMemsetD32Async with one value per block for the fill, and a copy to the host compared
//    word by word for the check (waiting for the stream at each check). kernels::why() says why; the test
//    GpuPattern.kernels_load fails then, so the fallback never goes unnoticed.
//  - Everything here throws vram::device_error naming the driver call when a call fails.
// Not thread-safe: one checker per host thread and stream; one kernels object may serve every thread.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "vram/core/types.hpp"
#include "vram/device/cuda_driver.hpp"

#if VRAM_HAVE_CUDA_H
#include <fmt/format.h>

#include "vram/core/error.hpp"
#endif

namespace vram::gpu_check {

/// @brief Word @p i of the pattern with seed @p seed; the PTX kernels compute exactly this.
constexpr std::uint32_t pattern_word(std::uint32_t seed, std::uint64_t i) noexcept {
  std::uint32_t x =
      seed ^ static_cast<std::uint32_t>(i) * 0x9E3779B9u ^ static_cast<std::uint32_t>(i >> 32) * 0x85EBCA6Bu;
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

/// @brief The seed of the block with sequence number @p sequence (splitmix64's finalizer, folded to 32 bits).
constexpr std::uint32_t block_seed(std::uint64_t sequence) noexcept {
  std::uint64_t z = sequence + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<std::uint32_t>(z ^ (z >> 32));
}

/// @brief Words of a block of @p bytes that the pattern covers: the whole 4-byte words inside it.
constexpr std::uint64_t words_of(std::size_t bytes) noexcept { return bytes / 4; }

#if VRAM_HAVE_CUDA_H
namespace detail {

// The CUDA C the PTX below was compiled from:
//   __device__ unsigned pattern(unsigned seed, unsigned long long i);  // as pattern_word above
//   extern "C" __global__ void vram_fill(unsigned* p, unsigned long long n, unsigned seed) {
//     for (i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = pattern(seed, i);
//   }
//   extern "C" __global__ void vram_check(const unsigned* p, unsigned long long n, unsigned seed, unsigned* bad) {
//     unsigned wrong = 0;
//     for (i as above) wrong += p[i] != pattern(seed, i);
//     if (wrong != 0) atomicAdd(bad, wrong);
//   }
//   // Spins until *flag != 0, or max_ns of %globaltimer have passed (so it can never hang a run).
//   extern "C" __global__ void vram_gate(const volatile unsigned* flag, unsigned long long max_ns) {
//     t0 = %globaltimer; while (*flag == 0) { if (%globaltimer - t0 > max_ns) break; __nanosleep(1000); }
//   }
// (i is unsigned long long throughout.)
inline constexpr const char* pattern_ptx = R"ptx(
.version 7.0
.target sm_75
.address_size 64
.visible .entry vram_fill(
  .param .u64 vram_fill_param_0,
  .param .u64 vram_fill_param_1,
  .param .u32 vram_fill_param_2
)
{
  .reg .pred   %p<3>;
  .reg .b32   %r<20>;
  .reg .b64   %rd<16>;
  ld.param.u64   %rd7, [vram_fill_param_0];
  ld.param.u64   %rd8, [vram_fill_param_1];
  ld.param.u32   %r1, [vram_fill_param_2];
  mov.u32   %r2, %ntid.x;
  cvt.u64.u32   %rd1, %r2;
  mov.u32   %r3, %ctaid.x;
  mul.wide.u32   %rd9, %r3, %r2;
  mov.u32   %r4, %tid.x;
  cvt.u64.u32   %rd10, %r4;
  add.s64   %rd15, %rd9, %rd10;
  setp.ge.u64   %p1, %rd15, %rd8;
  @%p1 bra   $L__BB0_3;
  mov.u32   %r5, %nctaid.x;
  cvt.u64.u32   %rd11, %r5;
  mul.lo.s64   %rd3, %rd11, %rd1;
  cvta.to.global.u64   %rd4, %rd7;
$L__BB0_2:
  cvt.u32.u64   %r6, %rd15;
  mul.lo.s32   %r7, %r6, -1640531527;
  xor.b32    %r8, %r7, %r1;
  shr.u64   %rd12, %rd15, 32;
  cvt.u32.u64   %r9, %rd12;
  mul.lo.s32   %r10, %r9, -2048144789;
  xor.b32    %r11, %r8, %r10;
  shr.u32   %r12, %r11, 16;
  xor.b32    %r13, %r12, %r11;
  mul.lo.s32   %r14, %r13, 2146121005;
  shr.u32   %r15, %r14, 15;
  xor.b32    %r16, %r15, %r14;
  mul.lo.s32   %r17, %r16, -2073254261;
  shr.u32   %r18, %r17, 16;
  xor.b32    %r19, %r18, %r17;
  shl.b64   %rd13, %rd15, 2;
  add.s64   %rd14, %rd4, %rd13;
  st.global.u32   [%rd14], %r19;
  add.s64   %rd15, %rd15, %rd3;
  setp.lt.u64   %p2, %rd15, %rd8;
  @%p2 bra   $L__BB0_2;
$L__BB0_3:
  ret;
}
.visible .entry vram_check(
  .param .u64 vram_check_param_0,
  .param .u64 vram_check_param_1,
  .param .u32 vram_check_param_2,
  .param .u64 vram_check_param_3
)
{
  .reg .pred   %p<5>;
  .reg .b32   %r<30>;
  .reg .b64   %rd<18>;
  ld.param.u64   %rd7, [vram_check_param_0];
  ld.param.u64   %rd8, [vram_check_param_1];
  ld.param.u32   %r4, [vram_check_param_2];
  ld.param.u64   %rd9, [vram_check_param_3];
  mov.u32   %r6, %ntid.x;
  cvt.u64.u32   %rd1, %r6;
  mov.u32   %r7, %ctaid.x;
  mul.wide.u32   %rd10, %r7, %r6;
  mov.u32   %r8, %tid.x;
  cvt.u64.u32   %rd11, %r8;
  add.s64   %rd17, %rd10, %rd11;
  setp.ge.u64   %p1, %rd17, %rd8;
  mov.u32   %r29, 0;
  @%p1 bra   $L__BB1_3;
  mov.u32   %r10, %nctaid.x;
  cvt.u64.u32   %rd12, %r10;
  mul.lo.s64   %rd3, %rd12, %rd1;
  cvta.to.global.u64   %rd4, %rd7;
  mov.u32   %r29, 0;
$L__BB1_2:
  cvt.u32.u64   %r11, %rd17;
  mul.lo.s32   %r12, %r11, -1640531527;
  xor.b32    %r13, %r12, %r4;
  shr.u64   %rd13, %rd17, 32;
  cvt.u32.u64   %r14, %rd13;
  mul.lo.s32   %r15, %r14, -2048144789;
  xor.b32    %r16, %r13, %r15;
  shr.u32   %r17, %r16, 16;
  xor.b32    %r18, %r17, %r16;
  mul.lo.s32   %r19, %r18, 2146121005;
  shr.u32   %r20, %r19, 15;
  xor.b32    %r21, %r20, %r19;
  mul.lo.s32   %r22, %r21, -2073254261;
  shr.u32   %r23, %r22, 16;
  xor.b32    %r24, %r23, %r22;
  shl.b64   %rd14, %rd17, 2;
  add.s64   %rd15, %rd4, %rd14;
  ld.global.u32   %r25, [%rd15];
  setp.ne.s32   %p2, %r25, %r24;
  selp.u32   %r26, 1, 0, %p2;
  add.s32   %r29, %r29, %r26;
  add.s64   %rd17, %rd17, %rd3;
  setp.lt.u64   %p3, %rd17, %rd8;
  @%p3 bra   $L__BB1_2;
$L__BB1_3:
  setp.eq.s32   %p4, %r29, 0;
  @%p4 bra   $L__BB1_5;
  cvta.to.global.u64   %rd16, %rd9;
  atom.global.add.u32   %r27, [%rd16], %r29;
$L__BB1_5:
  ret;
}
.visible .entry vram_gate(
  .param .u64 vram_gate_param_0,
  .param .u64 vram_gate_param_1
)
{
  .reg .pred   %p<4>;
  .reg .b32   %r<4>;
  .reg .b64   %rd<8>;
  ld.param.u64   %rd5, [vram_gate_param_0];
  ld.param.u64   %rd3, [vram_gate_param_1];
  cvta.to.global.u64   %rd1, %rd5;
  mov.u64 %rd4, %globaltimer;
  ld.volatile.global.u32   %r1, [%rd1];
  setp.ne.s32   %p1, %r1, 0;
  @%p1 bra   $L__BB2_3;
  bra.uni   $L__BB2_1;
$L__BB2_3:
  ret;
$L__BB2_1:
  mov.u64 %rd6, %globaltimer;
  sub.s64   %rd7, %rd6, %rd4;
  setp.gt.u64   %p2, %rd7, %rd3;
  @%p2 bra   $L__BB2_3;
  mov.u32   %r2, 1000;
  nanosleep.u32 %r2;
  ld.volatile.global.u32   %r3, [%rd1];
  setp.eq.s32   %p3, %r3, 0;
  @%p3 bra   $L__BB2_1;
  bra.uni   $L__BB2_3;
}
)ptx";

/// @brief Throws device_error for a failed driver call.
inline void check_call(const vram::detail::cuda_api& api, CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) throw device_error(fmt::format("{} failed: {}", what, vram::detail::cuda_error_text(api, r)));
}

inline constexpr unsigned threads_per_block = 256;
inline constexpr unsigned max_blocks = 4096;  // the kernels loop over the rest (grid-stride)

inline unsigned blocks_for(std::uint64_t words) {
  const std::uint64_t b = (words + threads_per_block - 1) / threads_per_block;
  return static_cast<unsigned>(b < max_blocks ? (b == 0 ? 1 : b) : max_blocks);
}

}  // namespace detail

/// @brief The fill, check and gate kernels, loaded into the context current at construction.
class kernels {
 public:
  /// @brief Loads the module. pre: a context is current on this thread (the one the kernels will run in).
  /// When the driver refuses the module, loaded() is false and why() holds the driver's answer and its log.
  explicit kernels(const vram::detail::cuda_api& api) : api_(&api) {
    char log[4096] = {};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof log - 1))};
    CUmodule m = nullptr;
    const CUresult r = api.module_load_data_ex(&m, detail::pattern_ptx, 2, options, values);
    if (r != CUDA_SUCCESS) {
      why_ = fmt::format("cuModuleLoadDataEx(pattern kernels) failed: {}{}{}", vram::detail::cuda_error_text(api, r),
                         log[0] != '\0' ? "; JIT log: " : "", log);
      return;
    }
    module_ = m;
    const char* names[] = {"vram_fill", "vram_check", "vram_gate"};
    CUfunction* slots[] = {&fill_, &check_, &gate_};
    for (int i = 0; i < 3; ++i) {
      if (const CUresult g = api.module_get_function(slots[i], m, names[i]); g != CUDA_SUCCESS) {
        why_ = fmt::format("cuModuleGetFunction({}) failed: {}", names[i], vram::detail::cuda_error_text(api, g));
        api.module_unload(m);
        module_ = nullptr;
        return;
      }
    }
  }
  ~kernels() {
    if (module_ != nullptr) api_->module_unload(module_);
  }
  kernels(const kernels&) = delete;
  kernels& operator=(const kernels&) = delete;

  bool loaded() const noexcept { return module_ != nullptr; }
  /// @brief Why the module did not load ("" when it did).
  const std::string& why() const noexcept { return why_; }

  /// @brief Queues the fill of @p words words at @p p with @p seed's pattern on @p s. pre: loaded().
  void fill(CUstream s, device_ptr p, std::uint64_t words, std::uint32_t seed) const {
    CUdeviceptr ptr = p;
    unsigned long long n = words;
    unsigned int sd = seed;
    void* params[] = {&ptr, &n, &sd};
    launch(fill_, detail::blocks_for(words), detail::threads_per_block, s, params, "vram_fill", p, words);
  }
  /// @brief Queues a check that adds the count of wrong words to the 32-bit counter at @p bad. pre: loaded().
  void check(CUstream s, device_ptr p, std::uint64_t words, std::uint32_t seed, CUdeviceptr bad) const {
    CUdeviceptr ptr = p;
    unsigned long long n = words;
    unsigned int sd = seed;
    CUdeviceptr counter = bad;
    void* params[] = {&ptr, &n, &sd, &counter};
    launch(check_, detail::blocks_for(words), detail::threads_per_block, s, params, "vram_check", p, words);
  }
  /// @brief Queues one thread that waits until the word at @p flag is not 0, or @p max_ns have passed.
  void gate(CUstream s, CUdeviceptr flag, std::uint64_t max_ns) const {
    CUdeviceptr f = flag;
    unsigned long long limit = max_ns;
    void* params[] = {&f, &limit};
    launch(gate_, 1, 1, s, params, "vram_gate", flag, 1);
  }

 private:
  void launch(CUfunction f, unsigned grid, unsigned block, CUstream s, void** params, const char* name, device_ptr p,
              std::uint64_t words) const {
    const CUresult r = api_->launch_kernel(f, grid, 1, 1, block, 1, 1, 0, s, params, nullptr);
    if (r != CUDA_SUCCESS) {
      detail::check_call(*api_, r, fmt::format("cuLaunchKernel({}, {:#x}, {} words, grid {})", name, p, words, grid));
    }
  }

  const vram::detail::cuda_api* api_;
  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr, check_ = nullptr, gate_ = nullptr;
  std::string why_;
};

/// @brief A block whose check found wrong words.
struct mismatch {
  device_ptr p = 0;
  std::size_t bytes = 0;
  std::uint64_t sequence = 0;
  std::uint32_t words_wrong = 0;
};

inline std::string describe(const mismatch& m) {
  return fmt::format("block #{} at {:#x} ({} bytes): {} of {} words wrong", m.sequence, m.p, m.bytes, m.words_wrong,
                     words_of(m.bytes));
}

/// @brief Fills and checks blocks on one stream, with the kernels or, where they did not load, with memsets
/// and host copies. One per host thread.
class checker {
 public:
  /// @brief pre: the context @p k was loaded in is current on this thread.
  checker(const vram::detail::cuda_api& api, const kernels& k, CUstream stream, std::size_t slots = 1024)
      : api_(&api), kernels_(&k), stream_(stream), slots_(slots) {
    if (k.loaded()) {
      CUdeviceptr c = 0;
      detail::check_call(api, api.mem_alloc(&c, slots * 4), fmt::format("cuMemAlloc({} counters)", slots));
      counters_ = c;
      // Queued on the stream: a plain cuMemsetD32 would go to the legacy stream, which does not order
      // the non-blocking streams the tests use.
      detail::check_call(api, api.memset_d32_async(counters_, 0, slots, stream), "cuMemsetD32Async(counters, 0)");
      pending_.reserve(slots);
      counts_.resize(slots);
    }
  }
  ~checker() {
    if (counters_ != 0) {
      api_->stream_synchronize(stream_);
      api_->mem_free(counters_);
    }
  }
  checker(const checker&) = delete;
  checker& operator=(const checker&) = delete;

  bool uses_kernels() const noexcept { return counters_ != 0; }
  CUstream stream() const noexcept { return stream_; }
  std::uint64_t blocks_checked() const noexcept { return checked_; }

  /// @brief Queues the fill of block @p sequence (the whole words of [p, p + bytes)) on the stream.
  void fill(device_ptr p, std::size_t bytes, std::uint64_t sequence) {
    const std::uint64_t words = words_of(bytes);
    if (words == 0) return;
    const std::uint32_t seed = block_seed(sequence);
    if (uses_kernels()) return kernels_->fill(stream_, p, words, seed);
    detail::check_call(*api_, api_->memset_d32_async(p, pattern_word(seed, 0), words, stream_),
                       fmt::format("cuMemsetD32Async({:#x}, {} words)", p, words));
  }

  /// @brief Checks block @p sequence: queued on the stream (kernels) or done now (fallback).
  void check(device_ptr p, std::size_t bytes, std::uint64_t sequence) {
    const std::uint64_t words = words_of(bytes);
    ++checked_;
    if (words == 0) return;
    const std::uint32_t seed = block_seed(sequence);
    if (uses_kernels()) {
      if (pending_.size() == slots_) read_counters();
      const CUdeviceptr slot = counters_ + 4 * pending_.size();
      kernels_->check(stream_, p, words, seed, slot);
      pending_.push_back({p, bytes, sequence, 0});
      return;
    }
    synchronize();
    host_.resize(words);
    detail::check_call(*api_, api_->memcpy_dtoh(host_.data(), p, words * 4),
                       fmt::format("cuMemcpyDtoH({:#x}, {} bytes)", p, words * 4));
    const std::uint32_t want = pattern_word(seed, 0);
    std::uint32_t wrong = 0;
    for (const std::uint32_t w : host_) wrong += w != want;
    if (wrong != 0) found_.push_back({p, bytes, sequence, wrong});
  }

  /// @brief Waits for the stream and returns the blocks found wrong since the last collect().
  std::vector<mismatch> collect() {
    if (uses_kernels()) read_counters();
    synchronize();
    std::vector<mismatch> out;
    out.swap(found_);
    return out;
  }

  /// @brief Waits for the work queued on the stream.
  void synchronize() {
    detail::check_call(*api_, api_->stream_synchronize(stream_), "cuStreamSynchronize(checker stream)");
  }

  /// @brief Throws invariant_error when the queued checks exceed the counters.
  void validate() const {
    if (pending_.size() > slots_) throw invariant_error(fmt::format("checker: {} checks queued for {} counters",
                                                                    pending_.size(), slots_));
    if (!uses_kernels() && !pending_.empty()) throw invariant_error("checker: checks queued without kernels");
  }

 private:
  void read_counters() {
    if (pending_.empty()) return;
    const std::size_t n = pending_.size();
    detail::check_call(*api_, api_->memcpy_dtoh_async(counts_.data(), counters_, n * 4, stream_),
                       "cuMemcpyDtoHAsync(counters)");
    synchronize();
    for (std::size_t i = 0; i < n; ++i) {
      if (counts_[i] != 0) found_.push_back({pending_[i].p, pending_[i].bytes, pending_[i].sequence, counts_[i]});
    }
    detail::check_call(*api_, api_->memset_d32_async(counters_, 0, n, stream_), "cuMemsetD32Async(counters, 0)");
    pending_.clear();
  }

  const vram::detail::cuda_api* api_;
  const kernels* kernels_;
  CUstream stream_;
  std::size_t slots_;
  CUdeviceptr counters_ = 0;          // slots_ 32-bit counters (kernel mode)
  std::vector<mismatch> pending_;     // the block checked into each counter, in order
  std::vector<std::uint32_t> counts_;  // the counters, read back
  std::vector<mismatch> found_;
  std::vector<std::uint32_t> host_;   // a block's words (fallback)
  std::uint64_t checked_ = 0;
};

#endif  // VRAM_HAVE_CUDA_H

}  // namespace vram::gpu_check
