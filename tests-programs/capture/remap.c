/* remap.c - code that changes under a running capture, each time through a
 * different door: the capture engines must run (and count) the new code,
 * never a stale decode or translation of the old.
 *
 * Usage: remap plain|coldcache CASE [DUMP]
 *   remap   a code file mapped before the capture; during it: called,
 *           unmapped and another file mapped at the same address (as a
 *           dlclose then dlopen can do), called, made writable, patched,
 *           made executable again, called
 *   rwx     an anonymous read-write-execute page written before the
 *           capture, rewritten in place (no system call) during it
 *   memfd   a memfd mapped twice (writable view, executable view) before
 *           the capture, rewritten through the writable view during it
 * The code is `mov eax, imm32; ret`. Prints the sum of what each round
 * of calls returned: the same line with and without capture.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "coldcache.h"

#define ROUND 200

typedef int (*fn)(void);

static void code(unsigned char *p, int value) {
    p[0] = 0xB8; /* mov eax, imm32 */
    memcpy(p + 1, &value, 4);
    p[5] = 0xC3; /* ret */
}

static char paths[2][32];
static int files;

/* A file holding one page whose code returns `value`; its descriptor. The
 * file stays until the end (a deleted file's mapping is not trusted). */
static int code_file(int value) {
    char *path = paths[files++];
    strcpy(path, "/tmp/coldcache-remap-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) { perror("mkstemp"); exit(1); }
    unsigned char page[4096];
    memset(page, 0xCC, sizeof page);
    code(page, value);
    if (write(fd, page, sizeof page) != (ssize_t)sizeof page) { perror("write"); exit(1); }
    return fd;
}

static long round_of(volatile fn f) {
    long s = 0;
    for (int i = 0; i < ROUND; i++) s += f();
    return s;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: remap plain|coldcache CASE [DUMP]\n"); return 2; }
    int capture = !strcmp(argv[1], "coldcache");
    const char *c = argv[2];
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *p = NULL, *w = NULL;
    int fd_b = -1;
    if (!strcmp(c, "remap")) {
        int fd_a = code_file(1);
        fd_b = code_file(2);
        p = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd_a, 0);
    } else if (!strcmp(c, "rwx")) {
        p = mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) code(p, 1);
    } else if (!strcmp(c, "memfd")) {
        int fd = memfd_create("remap", 0);
        if (fd < 0 || ftruncate(fd, page) != 0) { perror("memfd"); return 1; }
        w = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        p = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
        if (w != MAP_FAILED) code(w, 1);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    if (p == MAP_FAILED || w == MAP_FAILED) { perror("mmap"); return 1; }
    fn f = (fn)(uintptr_t)p;
    long before = round_of(f);

    if (capture) {
        struct coldcache_options o;
        coldcache_options_init(&o);
        o.cache = "cachegrind";
        o.output = argc > 3 ? argv[3] : "remap.ccdump";
        if (coldcache_start(&o) != 0) { fprintf(stderr, "%s\n", coldcache_last_error()); return 1; }
    }
    long r1 = round_of(f), r2 = 0, r3 = 0;
    if (!strcmp(c, "remap")) {
        if (munmap(p, page) != 0) { perror("munmap"); return 1; }
        if (mmap(p, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd_b, 0) != p) {
            perror("mmap fixed");
            return 1;
        }
        r2 = round_of(f);
        if (mprotect(p, page, PROT_READ | PROT_WRITE) != 0) { perror("mprotect"); return 1; }
        code(p, 3);
        if (mprotect(p, page, PROT_READ | PROT_EXEC) != 0) { perror("mprotect"); return 1; }
        r3 = round_of(f);
    } else if (!strcmp(c, "rwx")) {
        code(p, 2);
        r2 = round_of(f);
        code(p, 3);
        r3 = round_of(f);
    } else {
        code(w, 2);
        r2 = round_of(f);
        code(w, 3);
        r3 = round_of(f);
    }
    if (capture && coldcache_stop() != 0) { fprintf(stderr, "%s\n", coldcache_last_error()); return 1; }
    for (int i = 0; i < files; i++) unlink(paths[i]);
    printf("%s: %ld %ld %ld %ld\n", c, before, r1, r2, r3);
    return 0;
}
