/* errno.c - the program's errno must be what its own calls left, whatever
 * the capture did in between: a failed system call, then code the capture
 * has not seen yet (its translation runs in this thread, between the
 * program's call and its read of errno), then errno read back.
 *
 * The new code stores a pointer the translator takes for an rseq
 * descriptor (`lea reg, [rip+x]; mov [mem], reg`, as glibc arms an rseq
 * critical section) whose "abort handler" lies on an unreadable page: the
 * translator's check of the descriptor fails a read of this process's
 * memory. Before the capture kept errno, that read left EFAULT in errno
 * (CPython's start-up then failed with "OSError: [Errno 14] Bad address":
 * readlink's EINVAL, "not a link", had become EFAULT).
 *
 * Usage: errno plain|coldcache CASE [DUMP]; CASE: lookalike. Prints how
 * many of the rounds saw the errno they expected: the same line with and
 * without capture.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "coldcache.h"

/* head 0, start 0x1000, length 16, abort handler at 8: its signature word
 * at 4 lies on the null page. */
static uint64_t fake_cs[4] = {0, 0x1000, 16, 8};
static volatile uint64_t slot;

#define STORE(n)                                                        \
    __attribute__((noinline)) static void store_##n(void) {             \
        slot = (uint64_t)(uintptr_t)fake_cs + (n) * 0;                  \
        __asm__ volatile("" ::: "memory");                              \
    }
STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5) STORE(6) STORE(7)
static void (*const stores[8])(void) = {store_0, store_1, store_2, store_3,
                                        store_4, store_5, store_6, store_7};

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[2], "lookalike") != 0) {
        fprintf(stderr, "usage: errno plain|coldcache lookalike [DUMP]\n");
        return 2;
    }
    int capture = strcmp(argv[1], "coldcache") == 0;
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.cache = "cachegrind";
    o.output = argc > 3 ? argv[3] : "errno.ccdump";
    if (capture && coldcache_start(&o) != 0) {
        fprintf(stderr, "start: %s\n", coldcache_last_error());
        return 1;
    }
    int kept = 0;
    char buf[64];
    for (int i = 0; i < 8; i++) {
        errno = 0;
        /* "/" is no symbolic link: -1 with EINVAL. */
        ssize_t r = readlink("/", buf, sizeof buf);
        stores[i]();
        if (r == -1 && errno == EINVAL) kept++;
        else fprintf(stderr, "round %d: readlink %zd errno %d\n", i, r, errno);
    }
    int stopped = capture ? coldcache_stop() : 0;
    printf("errno kept in %d of 8 rounds, stop %d\n", kept, stopped);
    return 0;
}
