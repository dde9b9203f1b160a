/* selfmod.c - code that changes without an mprotect or munmap (issue 33):
 * the capture engines must run (and count) the new code, never a stale
 * decode or translation of the old.
 *
 * Usage: selfmod CASE
 *   mem      a function of the executable's .text (alone on its page),
 *            called, patched through /proc/self/mem (open + pwrite at its
 *            address, no system call between the write and the call),
 *            called, patched again with code of another length, called
 *   memsys   the same through /proc/<pid>/mem, the descriptor closed and
 *            getppid() made between each write and the call
 *   thread   the same through /proc/thread-self/mem, written with
 *            lseek + write
 *   early    the same through /proc/self/mem opened by `main` before
 *            `work` (outside a `--function work` window)
 *   fdlink   the same through /proc/self/fd/N, N a read-only descriptor
 *            of /proc/self/mem, reopened for writing (a magic link)
 *   view     a code file created here, mapped MAP_SHARED PROT_WRITE and
 *            its descriptor closed, then mapped PROT_READ|PROT_EXEC
 *            through a read-only descriptor, called, rewritten through
 *            the shared view (no writable descriptor left), called
 *   shared   a code file copied to /tmp, mapped PROT_READ|PROT_EXEC
 *            MAP_PRIVATE, called, then rewritten through a second,
 *            MAP_SHARED PROT_WRITE mapping of the same file, called
 *   pwrite   the same file rewritten with pwrite, then lseek + write
 *   reopen   the same, but the file is closed and mapped through a
 *            read-only descriptor, then opened again for writing (after
 *            it was mapped and called) and rewritten with pwrite, then
 *            lseek + write
 * Everything happens in `work` (the window of `record --function work`,
 * and of `record --all`). The code is `mov eax, imm32; ret`, the second
 * patch `push imm8; pop rax; ret`. Prints what each round of calls
 * returned: the same line with and without capture.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define ROUND 200

typedef int (*fn)(void);

/* Alone on its page of .text; starts with `mov eax, 1` (B8 imm32). */
__attribute__((noinline, aligned(4096), section(".text.selfmod"))) int patch_me(void) {
    return 1;
}

static long round_of(volatile fn f) {
    long s = 0;
    for (int i = 0; i < ROUND; i++) s += f();
    return s;
}

/* `mov eax, value; ret` (6 bytes) or, `other`, `push value; pop rax; ret`
 * (4 bytes) into `p`; the length. */
static size_t code(unsigned char *p, int value, int other) {
    if (other) {
        p[0] = 0x6A; /* push imm8 */
        p[1] = (unsigned char)value;
        p[2] = 0x58; /* pop rax */
        p[3] = 0xC3; /* ret */
        return 4;
    }
    p[0] = 0xB8; /* mov eax, imm32 */
    memcpy(p + 1, &value, 4);
    p[5] = 0xC3; /* ret */
    return 6;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static char path[64];
/* `early`: /proc/self/mem, opened by main. */
static int early_fd = -1;

/* Writes `value`'s code at `at` through the process's memory file. */
static void poke_mem(const char *c, int fd, void *at, int value, int other) {
    unsigned char b[8];
    size_t n = code(b, value, other);
    if (!strcmp(c, "thread")) {
        if (lseek(fd, (off_t)(uintptr_t)at, SEEK_SET) < 0) die("lseek");
        if (write(fd, b, n) != (ssize_t)n) die("write mem");
    } else if (pwrite(fd, b, n, (off_t)(uintptr_t)at) != (ssize_t)n) {
        die("pwrite mem");
    }
}

__attribute__((noinline)) static void work(const char *c) {
    long r[3];
    if (!strcmp(c, "mem") || !strcmp(c, "memsys") || !strcmp(c, "thread") || !strcmp(c, "early") ||
        !strcmp(c, "fdlink")) {
        volatile unsigned char *p = (volatile unsigned char *)patch_me;
        if (p[0] != 0xB8) {
            fprintf(stderr, "patch_me does not start with mov eax\n");
            exit(3);
        }
        char mem[64];
        if (!strcmp(c, "memsys")) snprintf(mem, sizeof mem, "/proc/%d/mem", (int)getpid());
        else if (!strcmp(c, "thread")) strcpy(mem, "/proc/thread-self/mem");
        else if (!strcmp(c, "fdlink")) {
            int ro = open("/proc/self/mem", O_RDONLY);
            if (ro < 0) die("/proc/self/mem");
            snprintf(mem, sizeof mem, "/proc/self/fd/%d", ro);
        }
        else strcpy(mem, "/proc/self/mem");
        fn f = patch_me;
        r[0] = round_of(f);
        for (int k = 1; k < 3; k++) {
            int fd = early_fd >= 0 ? early_fd : open(mem, O_RDWR);
            if (fd < 0) die(mem);
            poke_mem(c, fd, (void *)f, k == 1 ? 2 : 5, k == 2);
            if (!strcmp(c, "memsys")) {
                close(fd);
                if (getppid() < 0) die("getppid");
                r[k] = round_of(f);
            } else {
                r[k] = round_of(f);
                if (fd != early_fd) close(fd);
            }
        }
    } else if (!strcmp(c, "view")) {
        long page = sysconf(_SC_PAGESIZE);
        strcpy(path, "/tmp/coldcache-selfmod-XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0) die("mkstemp");
        unsigned char buf[4096];
        memset(buf, 0xCC, sizeof buf);
        code(buf, 1, 0);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) die("write");
        unsigned char *w = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (w == MAP_FAILED) die("mmap shared");
        close(fd);
        fd = open(path, O_RDONLY);
        if (fd < 0) die("open read-only");
        unsigned char *x = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
        if (x == MAP_FAILED) die("mmap exec");
        close(fd);
        fn f = (fn)(uintptr_t)x;
        r[0] = round_of(f);
        code(w, 2, 0);
        r[1] = round_of(f);
        code(w, 5, 1);
        r[2] = round_of(f);
        munmap(w, page);
        munmap(x, page);
        unlink(path);
    } else if (!strcmp(c, "shared") || !strcmp(c, "pwrite") || !strcmp(c, "reopen")) {
        long page = sysconf(_SC_PAGESIZE);
        strcpy(path, "/tmp/coldcache-selfmod-XXXXXX");
        int fd = mkstemp(path);
        if (fd < 0) die("mkstemp");
        unsigned char buf[4096];
        memset(buf, 0xCC, sizeof buf);
        code(buf, 1, 0);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) die("write");
        if (!strcmp(c, "reopen")) {
            close(fd);
            fd = open(path, O_RDONLY);
            if (fd < 0) die("open read-only");
        }
        unsigned char *x = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
        if (x == MAP_FAILED) die("mmap exec");
        fn f = (fn)(uintptr_t)x;
        r[0] = round_of(f);
        if (!strcmp(c, "shared")) {
            unsigned char *w = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (w == MAP_FAILED) die("mmap shared");
            code(w, 2, 0);
            r[1] = round_of(f);
            code(w, 5, 1);
            r[2] = round_of(f);
            munmap(w, page);
        } else {
            if (!strcmp(c, "reopen")) {
                close(fd);
                fd = open(path, O_WRONLY);
                if (fd < 0) die("open for writing");
            }
            size_t n = code(buf, 2, 0);
            if (pwrite(fd, buf, n, 0) != (ssize_t)n) die("pwrite");
            r[1] = round_of(f);
            n = code(buf, 5, 1);
            if (lseek(fd, 0, SEEK_SET) != 0) die("lseek");
            if (write(fd, buf, n) != (ssize_t)n) die("write");
            r[2] = round_of(f);
        }
        munmap(x, page);
        close(fd);
        unlink(path);
    } else {
        fprintf(stderr, "unknown case %s\n", c);
        exit(2);
    }
    printf("%s: %ld %ld %ld\n", c, r[0], r[1], r[2]);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: selfmod mem|memsys|thread|early|fdlink|view|shared|pwrite|reopen\n");
        return 2;
    }
    if (!strcmp(argv[1], "early")) {
        early_fd = open("/proc/self/mem", O_RDWR);
        if (early_fd < 0) die("/proc/self/mem");
    }
    work(argv[1]);
    return 0;
}
