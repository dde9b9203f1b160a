/* Eight threads passing a token in turn under a mutex and a condition
 * variable, until stdin is closed (crates/cli/tests/attach.rs attaches to
 * it and detaches many times). Every round computes the same hash; the
 * output says whether all rounds agreed, and does not depend on how many
 * rounds ran: a lost wake-up hangs, a corrupted register or a wrong
 * system call result changes it. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn, ending, stop;
static unsigned long acc, expected, rounds, bad;

/* Always 0; read each call, so the compiler cannot call `step` once and
 * keep the result (it is otherwise a pure function). */
static volatile int salt;

__attribute__((noinline)) unsigned long step(int i) {
    unsigned long s = salt;
    for (int k = 0; k < 200; k++) s = s * 31 + (unsigned long)(i * k);
    return s;
}

static void *worker(void *arg) {
    int i = (int)(long)arg;
    for (;;) {
        unsigned long v = step(i);
        struct timespec p = {0, 100000};
        nanosleep(&p, NULL);
        pthread_mutex_lock(&m);
        while (turn != i && !ending) pthread_cond_wait(&c, &m);
        if (ending) {
            pthread_mutex_unlock(&m);
            return NULL;
        }
        acc = acc * 1000003 + v;
        turn = (turn + 1) % THREADS;
        if (turn == 0) {
            if (rounds == 0) expected = acc;
            else if (acc != expected) bad++;
            rounds++;
            acc = 0;
            if (stop) ending = 1;
        }
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
    }
}

int main(void) {
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    printf("ready\n");
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {}
    pthread_mutex_lock(&m);
    stop = 1;
    pthread_mutex_unlock(&m);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("%d threads, every round agreed: %s, round hash %lx\n", THREADS,
           bad == 0 && rounds > 0 ? "yes" : "no", expected);
    return 0;
}
