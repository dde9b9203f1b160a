/* A hand-known call sequence for the timeline tests (crates/cli/tests/
 * timeline.rs): `work` calls a() three times and b() once, each a() calls
 * c(); each function sums its own array of 64-bit words, one read per
 * element (a: 100, b: 300, c: 50 elements), with known loop counts.
 * With argument `threads`, a second thread runs `work` too (two tracks).
 * Built -O1 -g: the functions are noinline, so each is a real call. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NA 100
#define NB 300
#define NC 50

static volatile uint64_t arr_a[NA], arr_b[NB], arr_c[NC];
static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t c(void) {
  uint64_t s = 0;
  for (int i = 0; i < NC; i++) s += arr_c[i];
  return s;
}

__attribute__((noinline)) static uint64_t a(void) {
  uint64_t s = 0;
  for (int i = 0; i < NA; i++) s += arr_a[i];
  return s + c();
}

__attribute__((noinline)) static uint64_t b(void) {
  uint64_t s = 0;
  for (int i = 0; i < NB; i++) s += arr_b[i];
  return s;
}

__attribute__((noinline)) uint64_t work(void) {
  uint64_t s = 0;
  for (int k = 0; k < 3; k++) s += a();
  s += b();
  return s;
}

static void *thread_main(void *arg) {
  (void)arg;
  sink = work();
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "threads") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    sink = work();
    pthread_join(t, NULL);
  } else {
    sink = work();
  }
  printf("%llu\n", (unsigned long long)sink);
  return 0;
}
