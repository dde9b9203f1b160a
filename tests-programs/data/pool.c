// An allocator of the program's own (issue 32): a pool of fixed-size
// slots with a free list, the kind game engines keep per object type,
// never calling malloc. `record --objects --allocator pool_alloc=size2
// --allocator pool_free=free2` (a "member function" form: the pool first,
// then the size or the block) makes its blocks objects, named by the
// allocator.
//
// The window, `work`, by hand (every access `volatile`, 8 bytes):
// - `spawn`: 64 pool_alloc(p, 40), 5 writes each: the site in `spawn`,
//   64 blocks, 2,560 bytes, 320 writes;
// - `update`: 3 rounds reading the first word of every block: 192 reads
//   at the `spawn` site;
// - 64 pool_free(p, block): every block freed. pool_free writes the free
//   list's link into the block after its entry, when the block is no
//   longer one: the pool's (its `.bss`), not the site's.
// Prints the sum read in the last round.
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct pool {
  unsigned char *next;
  void *free_list;
};

static _Alignas(64) unsigned char slots[64 * 64];
static struct pool the_pool = {slots, 0};

__attribute__((noipa)) static void *pool_alloc(struct pool *p, size_t n) {
  (void)n;
  if (p->free_list) {
    void *b = p->free_list;
    p->free_list = *(void **)b;
    return b;
  }
  void *b = p->next;
  p->next += 64;
  return b;
}

__attribute__((noipa)) static void pool_free(struct pool *p, void *b) {
  *(void **)b = p->free_list;
  p->free_list = b;
}

static volatile uint64_t *objs[64];

__attribute__((noinline)) static void spawn(void) {
  for (int i = 0; i < 64; i++) {
    volatile uint64_t *o = pool_alloc(&the_pool, 40);
    for (int k = 0; k < 5; k++) o[k] = (uint64_t)(i + k);
    objs[i] = o;
  }
}

__attribute__((noinline)) static uint64_t update(void) {
  uint64_t sum = 0;
  for (int r = 0; r < 3; r++) {
    sum = 0;
    for (int i = 0; i < 64; i++) sum += objs[i][0];
  }
  return sum;
}

__attribute__((noinline)) uint64_t work(void) {
  spawn();
  uint64_t s = update();
  for (int i = 0; i < 64; i++) pool_free(&the_pool, (void *)objs[i]);
  return s;
}

int main(void) {
  printf("%llu\n", (unsigned long long)work());
  return 0;
}
