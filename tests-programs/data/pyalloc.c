// CPython's object allocator (issue 32): `record --objects` observes
// `PyObject_Malloc`, `PyObject_Calloc`, `PyObject_Realloc` and
// `PyObject_Free` (and the `PyMem_` forms) besides `malloc`, because
// pymalloc carves most of an interpreter's objects out of arenas it maps
// itself, which `malloc` never sees. This program stands in for it: the
// four functions exported (built with -rdynamic, so they are in `.dynsym`
// as libpython's are) over a bump pool in `.bss`, never calling `malloc`.
//
// The window, `work`, by hand (every access `volatile`, 8 bytes):
// - `make`: 100 PyObject_Malloc(48), 6 writes each: the site in `make`,
//   100 blocks, 4,800 bytes, 600 writes;
// - PyObject_Realloc(block 0, 96): the copy inside it reads the old block
//   6 times (still the `make` site's: a realloc frees its old block when
//   it returns) and writes the new one 6 times (not yet a block: the
//   pool's `.bss`); then 12 writes to the new block: the realloc site,
//   1 block, 96 bytes, 12 writes, 0 reads;
// - PyObject_Calloc(4, 16): zeroed inside it (the pool's), then 8 reads:
//   the calloc site, 1 block, 64 bytes, 8 reads;
// - PyObject_Free of every live block (99 + 1 + 1): each site's blocks all
//   freed (the `make` site's 100: 99 freed, 1 moved by the realloc).
// Prints the sum of the calloc block's words (0).
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

static _Alignas(64) unsigned char pool[1 << 16];
static size_t used;

__attribute__((noipa)) void *PyObject_Malloc(size_t n) {
  void *p = pool + used;
  used += (n + 15) & ~(size_t)15;
  return p;
}

__attribute__((noipa)) void *PyObject_Calloc(size_t n, size_t size) {
  volatile uint64_t *p = PyObject_Malloc(n * size);
  for (size_t i = 0; i < n * size / 8; i++) p[i] = 0;
  return (void *)p;
}

__attribute__((noipa)) void *PyObject_Realloc(void *old, size_t n) {
  volatile uint64_t *p = PyObject_Malloc(n);
  volatile uint64_t *o = old;
  for (size_t i = 0; i < 6; i++) p[i] = o[i];
  return (void *)p;
}

__attribute__((noipa)) void PyObject_Free(void *p) { (void)p; }

static volatile uint64_t *blocks[100];

__attribute__((noinline)) void make(void) {
  for (int i = 0; i < 100; i++) {
    volatile uint64_t *b = PyObject_Malloc(48);
    for (int k = 0; k < 6; k++) b[k] = (uint64_t)(i + k);
    blocks[i] = b;
  }
}

__attribute__((noinline)) uint64_t work(void) {
  make();
  volatile uint64_t *r = PyObject_Realloc((void *)blocks[0], 96);
  for (int k = 0; k < 12; k++) r[k] = (uint64_t)k;
  volatile uint64_t *c = PyObject_Calloc(4, 16);
  uint64_t sum = 0;
  for (int k = 0; k < 8; k++) sum += c[k];
  for (int i = 1; i < 100; i++) PyObject_Free((void *)blocks[i]);
  PyObject_Free((void *)r);
  PyObject_Free((void *)c);
  return sum;
}

int main(void) {
  printf("%llu\n", (unsigned long long)work());
  return 0;
}
