/* Eight pthreads, each named, run zones from coldcache.h (the C form with
 * the cleanup attribute) inside functions instrumented with
 * -finstrument-functions: threads created after start-up, labels and
 * function hooks mixed; a constructor runs instrumented before main. Each thread: 50 x job > copy (4096 bytes), inside
 * worker(). Then the main thread writes the recording on demand with
 * coldcache_write(argv[1]) as well as at exit. */
#include "coldcache.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static char src[8][4096], dst[8][4096];

/* Instrumented code that runs before main (and before any constructor of
 * libcoldcache itself would): the hooks must record it. */
__attribute__((constructor)) void early_init(void) {
    for (int t = 0; t < 8; t++) src[t][0] = (char)t;
}

__attribute__((noinline)) void copy_block(int t) {
    COLDCACHE_ZONE_BYTES("copy", sizeof src[t]);
    memcpy(dst[t], src[t], sizeof src[t]);
}

__attribute__((noinline)) void job(int t) {
    COLDCACHE_ZONE("job");
    copy_block(t);
}

void *worker(void *arg) {
    int t = (int)(long)arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", t);
    coldcache_set_thread_name(name);
    for (int i = 0; i < 50; i++) job(t);
    return NULL;
}

int main(int argc, char **argv) {
    pthread_t th[8];
    for (long t = 0; t < 8; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < 8; t++) pthread_join(th[t], NULL);
    if (argc > 1 && coldcache_write(argv[1]) != 0) return 3;
    return 0;
}
