/*
 * Loads libvram.so as PyTorch, ctypes and plugin hosts do: with dlopen, after the program has started, so
 * the library's thread-local state must come from glibc's dynamic TLS, not its small static surplus. Run by
 * ctest with VRAM_DEVICE=sim:64MiB, once as is and once under
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0 (no static surplus for dlopen at all).
 * Usage: test_capi_dlopen PATH_OF_LIBVRAM_SO. Exits 0 when every answer is the one worked out below.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "vram/vram.h"

typedef void* (*malloc_fn)(ssize_t, int, void*);
typedef void (*free_fn)(void*, ssize_t, int, void*);
typedef int (*stats_fn)(int, vram_stats*);
typedef int (*code_fn)(void);
typedef const char* (*message_fn)(void);

static malloc_fn v_malloc;
static free_fn v_free;
static stats_fn v_stats;
static code_fn v_code;
static message_fn v_message;
static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "capi_dlopen: %s\n", what);
    ++failures;
  }
}

/* Each thread: 100 rounds of 1000 bytes (1024 once rounded) on device 1, then a double free that must set
 * this thread's status and message, not another's. */
static void* worker(void* arg) {
  int round;
  void* p;
  (void)arg;
  for (round = 0; round < 100; ++round) {
    p = v_malloc(1000, 1, NULL);
    if (p == NULL || v_code() != VRAM_SUCCESS) return (void*)1;
    v_free(p, 1000, 1, NULL);
    if (v_code() != VRAM_SUCCESS) return (void*)1;
  }
  p = v_malloc(1000, 1, NULL);
  v_free(p, 1000, 1, NULL);
  v_free(p, 1000, 1, NULL);
  if (v_code() != VRAM_ERROR_INVALID_ARGUMENT || strstr(v_message(), "double free") == NULL) return (void*)1;
  return NULL;
}

int main(int argc, char** argv) {
  void* lib;
  void* p;
  vram_stats stats;
  pthread_t threads[4];
  int i;
  if (argc != 2) {
    fprintf(stderr, "usage: %s PATH_OF_LIBVRAM_SO\n", argv[0]);
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "capi_dlopen: dlopen failed: %s\n", dlerror());
    return 1;
  }
  *(void**)&v_malloc = dlsym(lib, "vram_malloc");
  *(void**)&v_free = dlsym(lib, "vram_free");
  *(void**)&v_stats = dlsym(lib, "vram_get_stats");
  *(void**)&v_code = dlsym(lib, "vram_last_error_code");
  *(void**)&v_message = dlsym(lib, "vram_last_error");
  if (!v_malloc || !v_free || !v_stats || !v_code || !v_message) {
    fprintf(stderr, "capi_dlopen: a function is missing\n");
    return 1;
  }

  p = v_malloc(1000, 0, NULL);
  expect(p != NULL && v_code() == VRAM_SUCCESS, "vram_malloc(1000) returns a block");
  memset(&stats, 0, sizeof stats);
  expect(v_stats(0, &stats) == VRAM_SUCCESS, "vram_get_stats succeeds");
  expect(stats.allocated_bytes == 1024 && stats.requested_bytes == 1000, "1000 bytes requested, 1024 allocated");
  v_free(p, 1000, 0, NULL);
  expect(v_code() == VRAM_SUCCESS, "vram_free succeeds");

  for (i = 0; i < 4; ++i) expect(pthread_create(&threads[i], NULL, worker, NULL) == 0, "a thread starts");
  for (i = 0; i < 4; ++i) {
    void* result = NULL;
    pthread_join(threads[i], &result);
    expect(result == NULL, "a thread's rounds and its own error status");
  }
  expect(v_code() == VRAM_SUCCESS, "the main thread's status is untouched by the threads' failures");
  expect(v_stats(1, &stats) == VRAM_SUCCESS && stats.allocations == 404 && stats.frees == 404,
         "404 allocations and 404 frees on device 1");
  expect(stats.allocated_bytes == 0, "nothing live on device 1");

  if (failures == 0) printf("capi_dlopen: libvram.so loaded with dlopen and served 5 threads\n");
  return failures == 0 ? 0 : 1;
}
