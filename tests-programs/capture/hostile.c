/* hostile.c - capture regression program: what a traced program may do
 * that once broke a capture (found in review):
 *   - posix_spawn during a capture (a vfork child shares our memory);
 *   - fork during a capture, the child exiting while the parent traces;
 *   - a thread with glibc's minimum stack (16 KiB) traced from its start.
 * Usage: hostile DUMP. Prints the same line with and without capture.
 */
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "coldcache.h"

extern char **environ;

static void *small_worker(void *arg) {
    volatile uint64_t s = 0;
    for (int i = 0; i < 200; i++) s += (uint64_t)i;
    *(uint64_t *)arg = s;
    return NULL;
}

int main(int argc, char **argv) {
    struct coldcache_options o;
    coldcache_options_init(&o);
    o.threads = COLDCACHE_THREADS_ALL;
    o.cache = "cachegrind";
    o.output = argc > 1 ? argv[1] : "hostile.ccdump";
    int capture = argc > 1;
    if (capture && coldcache_start(&o) != 0) { fprintf(stderr, "start: %s\n", coldcache_last_error()); return 1; }

    pid_t pid;
    char *args[] = {"/bin/true", NULL};
    int spawned = posix_spawn(&pid, "/bin/true", NULL, NULL, args, environ);
    int st = -1;
    if (spawned == 0) waitpid(pid, &st, 0);

    pid_t child = fork();
    if (child == 0) _exit(7);
    int cst = -1;
    waitpid(child, &cst, 0);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 16384);
    pthread_t t;
    uint64_t out = 0;
    int created = pthread_create(&t, &attr, small_worker, &out);
    if (created == 0) pthread_join(t, NULL);

    int stopped = capture ? coldcache_stop() : 0;
    printf("spawn %d status %d fork-child %d small-thread %d sum %llu stop %d\n", spawned,
           WEXITSTATUS(st), WEXITSTATUS(cst), created, (unsigned long long)out, stopped);
    return 0;
}
