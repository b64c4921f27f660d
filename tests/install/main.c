/* Allocates 1000 bytes through an installed libvram.so and checks the pool's figures: 1024 allocated. */
#include <stdio.h>

#include "vram/vram.h"

int main(void) {
  vram_stats s;
  void* p = vram_malloc(1000, 0, NULL);
  if (p == NULL || vram_get_stats(0, &s) != VRAM_SUCCESS || s.allocated_bytes != 1024) {
    fprintf(stderr, "consumer_c: %s\n", vram_last_error());
    return 1;
  }
  vram_free(p, 1000, 0, NULL);
  printf("consumer_c: 1024 bytes allocated and freed through vram::c\n");
  return vram_last_error_code();
}
