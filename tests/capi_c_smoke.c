/*
 * Proves that include/vram/vram.h is C (built as C99 with -Wpedantic -Werror) and that libvram.so serves
 * a C program: allocate, read the statistics, free, trim. Run by ctest with VRAM_DEVICE=sim:64MiB.
 * Exits 0 when every answer is the one worked out below, else prints what differed and exits 1.
 */
#include <stdio.h>
#include <string.h>

#include "vram/vram.h"

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "capi_c_smoke: %s (last error %d: %s)\n", what, vram_last_error_code(), vram_last_error());
    ++failures;
  }
}

int main(void) {
  vram_stats stats;
  size_t released = 0;
  void* p = NULL;

  expect(vram_device_count() == 8, "8 simulated devices");

  /* 1000 bytes round up to 1024 (512-byte granularity); 1024 % 512 == 0. */
  p = vram_malloc(1000, 0, NULL);
  expect(p != NULL, "vram_malloc(1000) returns a block");
  expect(vram_last_error_code() == VRAM_SUCCESS, "status 0 after a successful malloc");
  expect(((size_t)p % 512) == 0, "the block is aligned to 512 bytes");

  memset(&stats, 0, sizeof stats);
  expect(vram_get_stats(0, &stats) == VRAM_SUCCESS, "vram_get_stats succeeds");
  expect(stats.requested_bytes == 1000, "requested 1000");
  expect(stats.allocated_bytes == 1024, "allocated 1024");
  expect(stats.allocations == 1, "one allocation");

  vram_free(p, 1000, 0, NULL);
  expect(vram_last_error_code() == VRAM_SUCCESS, "status 0 after a successful free");

  /* A second free of the same block is an error that vram_free can only report through the status. */
  vram_free(p, 1000, 0, NULL);
  expect(vram_last_error_code() == VRAM_ERROR_INVALID_ARGUMENT, "a double free sets INVALID_ARGUMENT");
  expect(strlen(vram_last_error()) > 0, "a double free sets a message");

  expect(vram_trim(0, &released) == VRAM_SUCCESS, "vram_trim succeeds");
  expect(vram_get_stats(0, &stats) == VRAM_SUCCESS, "vram_get_stats succeeds after trim");
  expect(stats.reserved_bytes == 0, "nothing reserved after all frees and a trim");
  expect(stats.frees == 1, "one free (the double free changed nothing)");

  if (failures == 0) printf("capi_c_smoke: all checks passed\n");
  return failures == 0 ? 0 : 1;
}
