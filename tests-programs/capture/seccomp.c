/* seccomp.c - hostile-program test: the program confines itself with
 * seccomp while a capture runs, or before one starts.
 *
 * Usage: seccomp MODE
 *   strict   (record --all) prints, enters strict mode with
 *            prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT), writes one more
 *            line with write(2) and ends with the raw exit system call
 *            (the only calls strict mode allows)
 *   filter   (record --all) prints, installs with seccomp(2) a filter
 *            that kills the process on any system call but write,
 *            exit_group and rt_sigreturn, prints again and exits 0
 *   tsync    (record --signal) starts a worker that spins and one that
 *            waits in read(2) on a pipe, prints "ready", spins 1 s (the
 *            test starts a capture of every thread meanwhile), installs
 *            the filter on every thread at once
 *            (SECCOMP_FILTER_FLAG_TSYNC), writes a byte to the pipe (the
 *            waiting worker's read returns under the filter: its first
 *            trap comes after it, and the capture engine's handler must
 *            make no system call there), spins 1.5 s more, prints and
 *            exits 0 (the workers never make a system call again)
 *   before   (record --signal) installs the same filter with
 *            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER) first, prints
 *            "ready", spins for 1.5 s (the test asks for a capture
 *            meanwhile), prints and exits 0
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static unsigned long work(int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; i++)
        s = s * 31 + (unsigned long)i;
    return s;
}

static struct sock_filter allow_few[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 3, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
static struct sock_fprog prog = {
    .len = sizeof allow_few / sizeof allow_few[0],
    .filter = allow_few,
};

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void spin(double s)
{
    double t0 = seconds();
    while (seconds() - t0 < s)
        sink = work(100);
}

static void *spinner(void *arg)
{
    (void)arg;
    for (;;)
        spin(1.0);
    return NULL;
}

static int wake[2];

static void *waiter(void *arg)
{
    (void)arg;
    char c;
    while (read(wake[0], &c, 1) != 1)
        ;
    for (;;)
        spin(1.0);
    return NULL;
}

static void say(const char *s)
{
    write(1, s, strlen(s));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: seccomp MODE\n");
        return 2;
    }
    const char *mode = argv[1];
    printf("main %lu\n", work(300));
    fflush(stdout);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        perror("PR_SET_NO_NEW_PRIVS");
        return 3;
    }
    if (strcmp(mode, "strict") == 0) {
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) {
            perror("strict");
            return 3;
        }
        say("in strict mode\n");
        sink = work(200);
        syscall(SYS_exit, 0);
    }
    if (strcmp(mode, "filter") == 0) {
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
            perror("filter");
            return 3;
        }
        say("filtered\n");
        sink = work(200);
        printf("done %lu\n", sink);
        return 0;
    }
    if (strcmp(mode, "tsync") == 0) {
        pthread_t w, r;
        if (pipe(wake) != 0) {
            perror("pipe");
            return 3;
        }
        pthread_create(&w, NULL, spinner, NULL);
        pthread_create(&r, NULL, waiter, NULL);
        say("ready\n");
        spin(1.0);
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0) {
            perror("filter");
            return 3;
        }
        say("filtered every thread\n");
        write(wake[1], "x", 1);
        spin(1.5);
        printf("done %lu\n", sink);
        return 0;
    }
    if (strcmp(mode, "before") == 0) {
        if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
            perror("filter");
            return 3;
        }
        say("ready\n");
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            sink = work(100);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 1500000000L);
        printf("spun %lu\n", sink);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
