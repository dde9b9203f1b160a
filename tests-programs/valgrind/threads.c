/* Two threads and main call `work` (20,000, 40,000 and 5,000 steps) for
 * `coldcache valgrind --separate-threads=yes` (crates/cli/tests/valgrind.rs):
 * one Callgrind file per thread. */
#include <pthread.h>
#include <stdio.h>

static long a[1000];

__attribute__((noipa)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += a[i % 1000] + i;
    return s;
}

static void *run(void *p) { return (void *)work((long)p); }

int main(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], 0, run, (void *)(20000 * (i + 1)));
    long s = work(5000);
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        s += (long)r;
    }
    printf("%ld\n", s);
    return 0;
}
