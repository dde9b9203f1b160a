/* amx.c - AMX tile registers live across a capture: a program that asked
 * the kernel for AMX (arch_prctl ARCH_REQ_XCOMP_PERM), loaded two tiles,
 * then runs code never run before (translated, through the dispatcher,
 * with the capture's own code in between) and stores the tiles back:
 * they must hold what was loaded.
 *
 * On a processor with AMX, XSAVE's full state (11,008 bytes with the
 * 8 KiB of tile data) is larger than the dispatcher's save area: the
 * dispatcher saves what coldcache's code can change and leaves the tiles
 * in their registers (before, fast mode refused to run on such machines).
 *
 * Usage: amx plain|coldcache tiles [DUMP]. Prints "no AMX" where the
 * kernel or processor has none, else the loop's sum and whether the
 * tiles were kept.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "coldcache.h"

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

struct tilecfg {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

__attribute__((noinline)) static long work(long n) {
    volatile double a[64] = {0};
    long s = 0;
    for (long i = 0; i < n; i++) {
        a[i & 63] = (double)i * 1.5;
        s += (long)a[(i * 7) & 63];
    }
    return s;
}

__attribute__((target("amx-tile"))) static int tiles_kept(void) {
    struct tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 2; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    static uint8_t in[2][16][64], out[2][16][64];
    for (int t = 0; t < 2; t++)
        for (int r = 0; r < 16; r++)
            for (int k = 0; k < 64; k++)
                in[t][r][k] = (uint8_t)(t * 31 + r * 7 + k);
    _tile_loadconfig(&c);
    _tile_loadd(0, in[0], 64);
    _tile_loadd(1, in[1], 64);
    long s = work(200000);
    _tile_stored(0, out[0], 64);
    _tile_stored(1, out[1], 64);
    _tile_release();
    printf("sum %ld, ", s);
    return memcmp(in, out, sizeof in) == 0;
}

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[2], "tiles") != 0) {
        fprintf(stderr, "usage: amx plain|coldcache tiles [DUMP]\n");
        return 2;
    }
    if (!__builtin_cpu_supports("amx-tile") ||
        syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        puts("no AMX");
        return 0;
    }
    int capture = strcmp(argv[1], "coldcache") == 0;
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.cache = "cachegrind";
    o.output = argc > 3 ? argv[3] : "amx.ccdump";
    if (capture && coldcache_start(&o) != 0) {
        fprintf(stderr, "start: %s\n", coldcache_last_error());
        return 1;
    }
    int kept = tiles_kept();
    int stop = capture ? coldcache_stop() : 0;
    printf("tiles %s, stop %d\n", kept ? "kept" : "CHANGED", stop);
    return 0;
}
