/* System calls in a loop, for fast mode's inline system calls
 * (crates/capture/src/jit/sys.rs): calls made inline (getpid, lseek,
 * fstat, futex wake, close, dup), calls that may block and replay first
 * (write and read on a pipe, a futex wait that returns at once, nanosleep
 * of 0) and calls the trap engine steps (rt_sigprocmask, mmap/munmap),
 * each result folded into a checksum so the output shows any wrong one.
 * `./syscalls [ROUNDS]` (default 2000). Deterministic: one thread. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static unsigned word = 7;

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 2000;
    int p[2];
    if (pipe(p) != 0)
        return 1;
    int fd = open("/dev/zero", O_RDONLY);
    unsigned long sum = 0;
    char buf[64];
    for (long i = 0; i < rounds; i++) {
        long pid = syscall(SYS_getpid);
        sum += pid == getpid();
        sum += (unsigned long)lseek(fd, i, SEEK_SET) * 3;
        struct stat st;
        sum += syscall(SYS_fstat, fd, &st) == 0 && S_ISCHR(st.st_mode);
        sum += syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0) + 5;
        /* The word is not 8: returns EAGAIN at once. */
        sum += syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 8, 0, 0, 0) == -1;
        int d = dup(fd);
        sum += d > 2;
        close(d);
        memset(buf, 'a' + i % 26, sizeof buf);
        sum += write(p[1], buf, 1 + i % 60);
        sum += read(p[0], buf, sizeof buf) * (unsigned long)buf[0];
        struct timespec z = {0, 0};
        sum += nanosleep(&z, 0) == 0;
        sigset_t old;
        sum += sigprocmask(SIG_BLOCK, 0, &old) == 0;
        if (i % 100 == 0) {
            void *m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            sum += m != MAP_FAILED && munmap(m, 4096) == 0;
        }
    }
    printf("rounds %ld checksum %lu\n", rounds, sum);
    return 0;
}
