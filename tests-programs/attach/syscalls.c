/* A main thread blocked in a system call while `coldcache attach` loads
 * the library on it (crates/cli/tests/attach.rs): the call must keep its
 * semantics. argv[1]: `sleep` (nanosleep of 1.5 s: the whole time must
 * pass), `read` (a pipe another thread writes to after 1.2 s: read returns
 * that data), `futex` (FUTEX_WAIT woken by another thread after 1.2 s:
 * returns 0), `seccomp` (installs an allow-everything seccomp filter,
 * then sleeps 3 s: attach must refuse it). Prints `ready` before blocking, then the outcome, then calls
 * `marker` (what the attach captures). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static atomic_int word;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) int marker(int x) {
    int s = 0;
    for (int i = 0; i < 100; i++) s += i ^ x;
    return s;
}

static void pause_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {}
}

static void *writer(void *arg) {
    (void)arg;
    pause_ms(1200);
    if (write(fds[1], "hello", 5) != 5) perror("write");
    return NULL;
}

static void *waker(void *arg) {
    (void)arg;
    pause_ms(1200);
    atomic_store(&word, 1);
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "sleep";
    pthread_t t;
    int ok = 0;
    if (!strcmp(mode, "sleep")) {
        printf("ready\n");
        fflush(stdout);
        double t0 = now();
        struct timespec d = {1, 500000000L};
        int r = nanosleep(&d, NULL);
        double slept = now() - t0;
        printf("nanosleep returned %d (%s), slept the whole 1.5 s: %s\n", r,
               r ? strerror(errno) : "ok", slept >= 1.5 ? "yes" : "no");
        ok = r == 0 && slept >= 1.5;
    } else if (!strcmp(mode, "seccomp")) {
        struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        struct sock_fprog prog = {1, allow};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
            perror("seccomp");
        printf("ready\n");
        fflush(stdout);
        pause_ms(3000);
        ok = 1;
    } else if (!strcmp(mode, "read")) {
        if (pipe(fds)) return 2;
        pthread_create(&t, NULL, writer, NULL);
        printf("ready\n");
        fflush(stdout);
        char buf[16] = {0};
        ssize_t n = read(fds[0], buf, sizeof buf - 1);
        printf("read returned %zd: %s\n", n, n < 0 ? strerror(errno) : buf);
        ok = n == 5 && !strcmp(buf, "hello");
        pthread_join(t, NULL);
    } else {
        pthread_create(&t, NULL, waker, NULL);
        printf("ready\n");
        fflush(stdout);
        long r;
        /* One wait: an EINTR (a restart not made) shows as -1. */
        r = syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        printf("futex wait returned %ld (%s), word %d\n", r, r ? strerror(errno) : "ok",
               atomic_load(&word));
        ok = r == 0 && atomic_load(&word) == 1;
        pthread_join(t, NULL);
    }
    printf("marker %d\n", marker(ok));
    return ok ? 0 : 1;
}
