/* shared.c - a short program for the tests of files written in shared
 * directories (crates/cli/tests/planted.rs, issue 33).
 *
 * Linked against libcoldcache.so and made set-user-ID root, run by an
 * unprivileged user whose environment names root-only files in
 * COLDCACHE_PROGRESS_FILE and COLDCACHE_ZONES_OUT: the library must ignore
 * every COLDCACHE_* setting (AT_SECURE) and leave those files alone. One
 * zone, so that the zones recorder starts and would write its file at
 * exit.
 *
 * Usage: shared [DIR]: with DIR, removes that (empty) directory before
 * exiting, so that a dump `record` checked it could write there cannot be
 * written at exit. Linked with the library, `shared --capture` captures
 * its loop with the C API (default output: coldcache.ccdump in the working
 * directory). Prints "done SUM euid EUID" (the test tells from EUID
 * whether the set-user-ID bit took effect).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#ifdef WITH_COLDCACHE_API
#include "coldcache.h"
#else
#define COLDCACHE_ZONE(name)
#endif

static volatile int sink;

int main(int argc, char **argv) {
    int capture = argc > 1 && strcmp(argv[1], "--capture") == 0;
#ifdef WITH_COLDCACHE_API
    if (capture && coldcache_start(NULL) != 0)
        fprintf(stderr, "coldcache_start: %s\n", coldcache_last_error());
#endif
    {
        COLDCACHE_ZONE("work");
        for (int i = 0; i < 1000; i++) sink += i;
    }
#ifdef WITH_COLDCACHE_API
    if (capture && coldcache_stop() != 0)
        fprintf(stderr, "coldcache_stop: %s\n", coldcache_last_error());
#endif
    if (argc > 1 && !capture && rmdir(argv[1]) != 0) perror(argv[1]);
    printf("done %d euid %d\n", sink, (int)geteuid());
    return 0;
}
