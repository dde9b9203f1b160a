/* Two threads that sleep in short nanosleeps for about 8 s and count the
 * sleeps a signal ended early (EINTR): `attach` without a trigger starts
 * and stops its capture with signals, and the dump's notes must count
 * every wait they ended (crates/cli/tests/attach.rs). Prints "ready",
 * then "interrupted N" at the end. Long enough that a one-second capture
 * ends while both still sleep, however loaded the machine: with 4 s, a
 * stop signal once came when `main` waited in `pthread_join`, whose
 * futex wait glibc restarts after EINTR unseen by the program (counted
 * by the capture, not by the program: 4 against 3). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static atomic_int interrupted;

static void *sleeper(void *arg)
{
    (void)arg;
    for (int i = 0; i < 80; i++) {
        struct timespec t = {0, 100000000}, rem;
        if (nanosleep(&t, &rem) != 0 && errno == EINTR)
            atomic_fetch_add(&interrupted, 1);
    }
    return 0;
}

int main(void)
{
    pthread_t t;
    pthread_create(&t, 0, sleeper, 0);
    printf("ready\n");
    fflush(stdout);
    sleeper(0);
    pthread_join(t, 0);
    printf("interrupted %d\n", atomic_load(&interrupted));
    return 0;
}
