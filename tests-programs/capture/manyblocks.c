/* manyblocks.c - a program with more translated blocks than the
 * translator once kept: 300,000 entry points, each a block of its own
 * (`nop; ret`, entered by an indirect call), in the program's own text
 * (file-backed code, which fast mode translates). The translator's
 * tables were sized once, for 262,144 blocks; the blocks past them ran
 * under the trap engine (rustc with LLVM ran 12% of its instructions
 * trapped). Now they grow.
 *
 * Usage: manyblocks plain|coldcache CASE [DUMP]; CASE: calls. Prints the
 * number of calls made: the same line with and without capture.
 */
#include <stdio.h>
#include <string.h>
#include "coldcache.h"

#define ENTRIES 300000

__asm__(".text\n"
        ".globl many_entries\n"
        ".type many_entries, @function\n"
        "many_entries:\n"
        ".rept 300000\n"
        "nop\n"
        "ret\n"
        ".endr\n"
        ".size many_entries, .-many_entries\n");
extern const char many_entries[];

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[2], "calls") != 0) {
        fprintf(stderr, "usage: manyblocks plain|coldcache calls [DUMP]\n");
        return 2;
    }
    int capture = strcmp(argv[1], "coldcache") == 0;
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.cache = "cachegrind";
    o.output = argc > 3 ? argv[3] : "manyblocks.ccdump";
    if (capture && coldcache_start(&o) != 0) {
        fprintf(stderr, "start: %s\n", coldcache_last_error());
        return 1;
    }
    long calls = 0;
    for (long k = 0; k < ENTRIES; k++) {
        void (*volatile f)(void) = (void (*)(void))(many_entries + 2 * k);
        f();
        calls++;
    }
    int stopped = capture ? coldcache_stop() : 0;
    printf("%ld calls, stop %d\n", calls, stopped);
    return 0;
}
