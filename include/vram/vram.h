/*
 * vram's C API: vram's pool behind plain C functions, built as libvram.so.
 *
 * Design notes:
 *  - vram_malloc / vram_free have exactly the shape PyTorch's CUDAPluggableAllocator loads from a shared
 *    library, so `torch.cuda.memory.CUDAPluggableAllocator("libvram.so", "vram_malloc", "vram_free")`
 *    puts every tensor of a program in vram's pool (docs/c-api.md).
 *  - One pool per device index, made on first use. The environment variable VRAM_DEVICE chooses what
 *    stands behind the indices: auto (CUDA device N when a GPU is usable, else a simulated device N), sim,
 *    sim:CAPACITY (e.g. sim:64MiB) or cuda. The pool's settings come from its own variables (VRAM_LIMIT,
 *    VRAM_MAX_CACHED_RATIO, ...), read when a device's pool is made.
 *  - Nothing is thrown across this boundary. Each call sets this thread's status: vram_last_error_code()
 *    reads 0 after a call that succeeded and the failing call's code after one that failed;
 *    vram_last_error() keeps the message of this thread's most recent failure until the next failure.
 *    With VRAM_RECORD set, the library calls vram_record_start itself when it is loaded, on the loading
 *    thread (vram_record_start, below).
 *  - No CUDA header is needed: a stream is a `void*` (a cudaStream_t / CUstream; NULL is the default
 *    stream), a device pointer is a `void*`.
 *  - All functions are thread-safe.
 *
 * The header compiles as C99 and as C++.
 */
#ifndef VRAM_VRAM_H
#define VRAM_VRAM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#if defined(__GNUC__)
#define VRAM_API __attribute__((visibility("default")))
#else
#define VRAM_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Version of this API; grows when functions or fields are added. */
#define VRAM_C_API_VERSION 2

/** @brief Status codes returned by the functions and by vram_last_error_code(). */
enum vram_status {
  VRAM_SUCCESS = 0,                /**< the call succeeded */
  VRAM_ERROR_OUT_OF_MEMORY = 1,    /**< the pool could not serve the request (the message says what it holds) */
  VRAM_ERROR_INVALID_ARGUMENT = 2, /**< a bad argument: a negative size, a bad device index, a null output, a free
                                        of a pointer not handed out, a double free, a wrong size or device */
  VRAM_ERROR_DEVICE = 3,           /**< the driver failed, or the device VRAM_DEVICE names cannot be had */
  VRAM_ERROR_INTERNAL = 4          /**< a broken invariant or an unexpected failure inside vram */
};

/**
 * @brief The version of vram_stats this header describes. Fields are only ever added at its end: version 1 had
 * the 12 fields up to failed_allocations (96 bytes), version 2 adds the pool's calls to the device (136 bytes).
 */
#define VRAM_STATS_VERSION 2

/** @brief A device's pool figures, as vram's pool_stats has them. Bytes are current unless named peak. */
typedef struct vram_stats {
  size_t requested_bytes;      /**< bytes the program asked for, in live blocks */
  size_t allocated_bytes;      /**< rounded sizes of live blocks */
  size_t peak_allocated_bytes; /**< most bytes in blocks handed out so far, live or kept in a thread's cache for
                                    reuse (taken when the pool's lock is, so at or above the peak of allocated_bytes) */
  size_t reserved_bytes;       /**< bytes the pool holds from the device */
  size_t peak_reserved_bytes;  /**< most reserved_bytes so far */
  size_t cached_bytes;         /**< reserved but in no live block (reserved - allocated) */
  size_t thread_cached_bytes;  /**< of cached_bytes, those in threads' caches of freed blocks */
  size_t pending_bytes;        /**< of cached_bytes, those freed but waiting for their streams' work */
  size_t mapped_bytes;         /**< reserved bytes mapped into the pool's address range */
  uint64_t allocations;        /**< successful allocations */
  uint64_t frees;              /**< successful frees */
  uint64_t failed_allocations; /**< allocations refused for lack of memory */
  /* Since version 2: the pool's calls to the device. */
  uint64_t alloc_retries;  /**< allocations that found the device full and recycled or released memory to try again, served or not */
  uint64_t handles_created;  /**< physical memory handles made (cuMemCreate) */
  uint64_t handles_released; /**< handles given back (cuMemRelease) */
  uint64_t maps;             /**< views of handles mapped into the pool's address range (cuMemMap) */
  uint64_t unmaps;           /**< views unmapped (cuMemUnmap) */
} vram_stats;

/**
 * @brief Allocates @p size bytes on device @p device for use in order on @p stream.
 *
 * The block is aligned to 512 bytes. @p size 0 returns NULL and succeeds (as cudaMalloc does).
 * @param size bytes wanted; negative is an error (VRAM_ERROR_INVALID_ARGUMENT).
 * @param device device index, 0 <= device < vram_device_count().
 * @param stream the stream (cudaStream_t) the block is used on; NULL for the default stream.
 * @return the block, or NULL on failure: then vram_last_error_code() is VRAM_ERROR_OUT_OF_MEMORY (the
 *         message names the request and what the pool holds), VRAM_ERROR_INVALID_ARGUMENT or
 *         VRAM_ERROR_DEVICE.
 */
VRAM_API void* vram_malloc(ssize_t size, int device, void* stream);

/**
 * @brief Frees a block from vram_malloc; @p size, @p device and @p stream as given to vram_malloc.
 *
 * Its memory is reused in order on @p stream (and after the work of streams named by vram_record_stream).
 * A NULL @p ptr does nothing and succeeds. This function returns nothing, so a failure is reported only
 * through vram_last_error_code() / vram_last_error(): a pointer this device's pool did not hand out, a
 * double free, a size other than the one allocated, a bad device index or a negative size give
 * VRAM_ERROR_INVALID_ARGUMENT and leave the pool unchanged. After a free that succeeded
 * vram_last_error_code() reads 0.
 */
VRAM_API void vram_free(void* ptr, ssize_t size, int device, void* stream);

/**
 * @brief Marks the live block @p ptr as used on @p stream too (PyTorch's record_stream): when it is freed
 * its memory is reused only once @p stream's work queued before the free has completed.
 * @return VRAM_SUCCESS, or VRAM_ERROR_INVALID_ARGUMENT for a NULL pointer, a bad device, or a pointer the
 *         pool rejects.
 */
VRAM_API int vram_record_stream(void* ptr, int device, void* stream);

/**
 * @brief Gives the device every byte of memory the pool holds that no live block uses.
 * @param released where to store the bytes given back; may be NULL.
 * @return VRAM_SUCCESS, or an error code (VRAM_ERROR_INVALID_ARGUMENT for a bad device).
 */
VRAM_API int vram_trim(int device, size_t* released);

/**
 * @brief Sets the most bytes the device's pool may hold from the device; 0 removes the limit.
 * Memory held above a new, lower limit is not given back at once; allocations that would need more fail.
 * @return VRAM_SUCCESS, or an error code.
 */
VRAM_API int vram_set_limit(int device, size_t bytes);

/**
 * @brief Reads the device pool's limit (0: none) into @p bytes.
 * @return VRAM_SUCCESS, or VRAM_ERROR_INVALID_ARGUMENT for a bad device or a NULL @p bytes.
 */
VRAM_API int vram_get_limit(int device, size_t* bytes);

/**
 * @brief Copies the device pool's statistics into @p out: the whole vram_stats of the library's version, which
 * must be no larger than the caller's. A program that may meet a library newer than its header calls
 * vram_get_stats_sized(device, &s, sizeof s) instead.
 * @return VRAM_SUCCESS, or VRAM_ERROR_INVALID_ARGUMENT for a bad device or a NULL @p out.
 */
VRAM_API int vram_get_stats(int device, vram_stats* out);

/**
 * @brief Copies the device pool's statistics into the @p size bytes at @p out: the first @p size bytes of the
 * library's vram_stats where the caller's structure is the same size or smaller (an older header), and the
 * whole of it followed by zeros where the caller's is larger (a newer header). Nothing past @p size is written.
 * @param size sizeof the caller's vram_stats; at least 8.
 * @return VRAM_SUCCESS, or VRAM_ERROR_INVALID_ARGUMENT for a bad device, a NULL @p out or a @p size under 8.
 */
VRAM_API int vram_get_stats_sized(int device, void* out, size_t size);

/**
 * @brief Sets the device pool's peaks (peak_allocated_bytes, peak_reserved_bytes) to the current figures.
 * @return VRAM_SUCCESS, or VRAM_ERROR_INVALID_ARGUMENT for a bad device.
 */
VRAM_API int vram_reset_peak_stats(int device);

/**
 * @brief Starts writing every vram_malloc and vram_free that succeeds, on every device, to a trace in
 * vram's format (docs/trace-format.md): device 0's to @p path, device N's to @p path with ".devN" before
 * its extension ("run.vram" -> "run.dev1.vram"). Times are microseconds since the recording started.
 * The files are valid after every flush: when the buffer fills, at vram_record_stop() and at exit.
 * Setting VRAM_RECORD=path in the environment starts the same recording when the library is loaded (at
 * the program's start where it is linked in, inside dlopen where it is opened so): the library calls this
 * function then, on the loading thread. Where that call fails, its message is written to stderr, the
 * program runs unrecorded, and the loading thread's vram_last_error_code() reads the failure's code
 * (VRAM_ERROR_INVALID_ARGUMENT) until that thread's next call, vram_last_error() its message.
 * @return VRAM_SUCCESS; VRAM_ERROR_INVALID_ARGUMENT when a recording is already under way, or @p path is
 *         NULL, empty, ends in ".gz" or cannot be created (the message names it and says why).
 */
VRAM_API int vram_record_start(const char* path);

/**
 * @brief Flushes and closes the recording; does nothing when none is under way.
 * @return VRAM_SUCCESS, or VRAM_ERROR_INTERNAL when writing failed (the message names the file).
 */
VRAM_API int vram_record_stop(void);

/**
 * @brief The device pool's snapshot as a JSON text: its address range, handles, free ranges and live
 * blocks (docs/pool.md describes the fields).
 * @return a NUL-terminated string for the caller to give to vram_free_string(), or NULL on failure.
 */
VRAM_API char* vram_snapshot_json(int device);

/** @brief Frees a string from vram_snapshot_json(); NULL does nothing. */
VRAM_API void vram_free_string(char* text);

/**
 * @brief The number of device indices: the CUDA devices visible to the process, or 8 simulated devices.
 * @return the count, or -1 on failure (e.g. VRAM_DEVICE is malformed, or names cuda where no GPU is
 *         usable), with the reason in vram_last_error().
 */
VRAM_API int vram_device_count(void);

/**
 * @brief The device's description, e.g. "NVIDIA H200 (cuda:0, 143771 MiB, 2 MiB granules)" or
 * "simulated device #1 (64 MiB, 2 MiB granules)". Makes the device's pool when it does not exist yet.
 * @return a string owned by vram that lives as long as the process, or NULL on failure.
 */
VRAM_API const char* vram_device_name(int device);

/**
 * @brief The status of this thread's most recent call: VRAM_SUCCESS (0) when it succeeded, else its
 * error code; 0 before the thread's first call, except on the thread that loaded the library when
 * VRAM_RECORD's recording failed to start (vram_record_start). Does not change the status.
 */
VRAM_API int vram_last_error_code(void);

/**
 * @brief The message of this thread's most recent failing call, e.g. the pool's out-of-memory message with
 * what was asked, what the pool holds and what to try; "" when none has failed (on the thread that loaded
 * the library, VRAM_RECORD's failed start counts as one). A call that succeeds leaves it in place; the
 * string stays valid until the next failing call on this thread.
 */
VRAM_API const char* vram_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VRAM_VRAM_H */
