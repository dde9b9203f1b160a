/* selfpipe.c - a program that waits for its own timer's handler (issue
 * 33): each round arms a one-shot ITIMER_REAL, computes, then blocks in
 * read(2) on a pipe that only the SIGALRM handler writes to (the
 * self-pipe pattern of event loops). The read returns only once the
 * handler has run: a capture that delays the signal past the read (holds
 * it blocked while the thread enters the call) hangs the program.
 *
 * Usage: selfpipe [ROUNDS [MICROSECONDS]] (default 100 rounds, 300 us).
 * Prints the computation's sum and the rounds completed. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static int fds[2];

static void on_alarm(int sig)
{
    (void)sig;
    char c = 'x';
    (void)!write(fds[1], &c, 1);
}

__attribute__((noinline)) static long work(long n, long seed)
{
    long s = seed;
    for (long i = 0; i < n; i++) {
        s += (i * 7) ^ (s >> 3);
    }
    return s;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 100;
    long us = argc > 2 ? atol(argv[2]) : 300;
    if (pipe(fds) != 0) {
        perror("pipe");
        return 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    long sum = 0;
    int done = 0;
    for (int r = 0; r < rounds; r++) {
        struct itimerval t = {{0, 0}, {0, us}};
        setitimer(ITIMER_REAL, &t, NULL);
        sum += work(20000, r);
        char c;
        if (read(fds[0], &c, 1) == 1) {
            done++;
        }
    }
    printf("%ld %d\n", sum, done);
    return 0;
}
