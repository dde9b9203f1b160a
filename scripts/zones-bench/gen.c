/* A synthetic zones recording for scripts/zones-export-bench.sh: FRAMES
 * frames (argv[1]) split between the main thread and one worker, each
 * frame: frame > update (declares bytes) > 100 x (physics > solve), draw,
 * then a frame mark: 408 events a frame (1 + 2 + 3 + 400 + 2), so 46,600
 * frames are 19.0M events. Built against coldcache.h, linked with
 * -lcoldcache; recorded with `coldcache zones record`. */
#include "coldcache.h"
#include <pthread.h>
#include <stdlib.h>

static volatile unsigned long sink;

static void frames(long n) {
    for (long f = 0; f < n; f++) {
        COLDCACHE_ZONE("frame");
        {
            COLDCACHE_ZONE_BYTES("update", 4096);
            for (int i = 0; i < 100; i++) {
                COLDCACHE_ZONE("physics");
                COLDCACHE_ZONE("solve");
                sink += (unsigned long)i;
            }
        }
        {
            COLDCACHE_ZONE("draw");
            sink++;
        }
        coldcache_frame_mark();
    }
}

static void *worker(void *arg) {
    coldcache_set_thread_name("worker");
    frames((long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    coldcache_set_thread_name("main");
    pthread_t t;
    pthread_create(&t, NULL, worker, (void *)(n / 2));
    frames(n - n / 2);
    pthread_join(t, NULL);
    return 0;
}
