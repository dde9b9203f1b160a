/* mapfixed.c - a program that maps over address space it believes free,
 * during a capture: a JIT or an allocator that scanned /proc/self/maps at
 * its start and later claims what was free then, with MAP_FIXED (issue
 * 33, "address space the program claims"). Whatever coldcache mapped there
 * since (the code cache, its tables) must not be what the program crashes
 * on, and the program must compute what it computes without a capture.
 * Only a mapping made after the program's first scan is claimed (the
 * first one of its kind, one claim a run): what was there at its start it
 * knows to be taken.
 *
 * Usage: mapfixed plain|coldcache CASE [DUMP [DUMP2]]
 *   code    maps anonymous read-write pages with MAP_FIXED over an
 *           executable mapping that is not a file's (a memfd's counts as
 *           none: the code cache's view is one)
 *   far     the same over a mapping between 16 TiB and 64 TiB (far from
 *           where the kernel puts the program's own mappings)
 *   unmap   munmaps the mapping `far` would replace
 *   between as `code`, but between two captures: the first ends, the
 *           program claims the code cache's view untraced, and a second
 *           capture runs the same work
 * Before and after, the program calls a function many times; it prints
 * the sums (the same line with and without capture) and nothing about
 * what it found: without a capture there is nothing there.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "coldcache.h"

__attribute__((noinline)) static long work(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += (i * 7) ^ (s >> 3);
    return s;
}

struct range { uintptr_t start, end; };

/* The mappings at the program's start. */
static struct range known[512];
static int nknown;

static int was_known(uintptr_t s) {
    for (int i = 0; i < nknown; i++)
        if (s >= known[i].start && s < known[i].end) return 1;
    return 0;
}

static uintptr_t hex(const char **p) {
    uintptr_t v = 0;
    for (;; (*p)++) {
        char ch = **p;
        if (ch >= '0' && ch <= '9') v = v * 16 + (uintptr_t)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') v = v * 16 + (uintptr_t)(ch - 'a' + 10);
        else return v;
    }
}

/* The mappings the case claims (all of them when `all`, to record what
 * is there at the start), read before any of them is touched. Parsed by
 * hand, with read(2): during a trap-mode capture every instruction is
 * single-stepped, and stdio's scanf costs thousands a line. */
static int victims(const char *c, struct range *out, int max, int all) {
    static char buf[1 << 16];
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0) { perror("maps"); exit(1); }
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)got;
    close(fd);
    buf[len] = 0;
    int n = 0;
    for (const char *p = buf; *p && n < max;) {
        const char *line = p;
        uintptr_t s = hex(&p);
        p++; /* '-' */
        uintptr_t e = hex(&p);
        int exec = p[3] == 'x';
        /* The path: after five fields, past the spaces. */
        int fields = 0;
        while (*p && *p != '\n' && fields < 5) {
            while (*p == ' ') p++;
            while (*p && *p != ' ' && *p != '\n') p++;
            fields++;
        }
        while (*p == ' ') p++;
        const char *path = p;
        while (*p && *p != '\n') p++;
        if (*p) p++;
        (void)line;
        int special = path[0] == '[';
        int file = path[0] == '/' && strncmp(path, "/memfd:", 7) != 0;
        int code = exec && !special && !file && path[0] != '\n';
        int far = s >= (16UL << 40) && e <= (64UL << 40);
        if (all || (!was_known(s) && ((!strcmp(c, "code") && code) ||
                                      (!strcmp(c, "far") && far) ||
                                      (!strcmp(c, "unmap") && far)))) {
            out[n].start = s;
            out[n].end = e;
            n++;
        }
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: mapfixed plain|coldcache CASE [DUMP]\n"); return 2; }
    int capture = !strcmp(argv[1], "coldcache");
    const char *c = argv[2];
    int between = !strcmp(c, "between");
    if (between) c = "code";
    if (strcmp(c, "code") && strcmp(c, "far") && strcmp(c, "unmap")) {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    nknown = victims(c, known, 512, 1);
    if (capture) {
        struct coldcache_options o;
        coldcache_options_init(&o);
        o.cache = "cachegrind";
        o.output = argc > 3 ? argv[3] : "mapfixed.ccdump";
        if (coldcache_start(&o) != 0) { fprintf(stderr, "%s\n", coldcache_last_error()); return 1; }
    }
    long before = 0;
    for (int i = 0; i < 5; i++) before += work(200);
    if (capture && between) coldcache_stop();
    static struct range r[1];
    int n = victims(c, r, 1, 0);
    for (int i = 0; i < n; i++) {
        void *at = (void *)r[i].start;
        size_t len = r[i].end - r[i].start;
        if (!strcmp(c, "unmap")) {
            if (munmap(at, len) != 0) { perror("munmap"); return 1; }
        } else if (mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != at) {
            perror("mmap fixed");
            return 1;
        } else {
            memset(at, 0xCC, len); /* ours now: written as a program would */
        }
    }
    if (capture && between) {
        struct coldcache_options o;
        coldcache_options_init(&o);
        o.cache = "cachegrind";
        o.output = argc > 4 ? argv[4] : "mapfixed.2.ccdump";
        if (coldcache_start(&o) != 0) { fprintf(stderr, "%s\n", coldcache_last_error()); return 1; }
    }
    long after = 0;
    /* Another argument for `between`: the compiler may reuse a pure call's
     * result, and the second capture would have nothing to count. */
    for (int i = 0; i < 5; i++) after += work(200 + between);
    if (capture && coldcache_stop() != 0) {
        /* The capture may have ended itself; the program goes on. */
    }
    printf("%s: %ld %ld\n", between ? "between" : c, before, after);
    return 0;
}
