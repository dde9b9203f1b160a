/* A program that closes descriptors it never opened, as a daemon does when
 * it starts, then opens files of its own (which natively take the lowest
 * numbers, 3 and up) and writes, reads and checks them.
 *
 *   closefds loop|closefrom|close_range   close every descriptor from 3 up
 *       (a loop of close() up to 1024, closefrom(3), or the raw system
 *       call through syscall()), open eight files, write each, work (so a
 *       capture writes trace chunks meanwhile), write each again, read each
 *       back and print what was read: the same text natively and captured.
 *   closefds wait                         close everything from 3 up, open
 *       this program's input file, sleep two seconds (a --signal capture's
 *       writer thread waits meanwhile), read the file and print its length
 *       and byte sum.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile unsigned long sink;

static void work(int rounds) {
    static char buf[1 << 20];
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < (1 << 20); i += 64) {
            buf[i]++;
            sink += buf[i];
        }
}

static void close_all(const char *how) {
    if (!strcmp(how, "loop") || !strcmp(how, "wait")) {
        for (int fd = 3; fd < 1024; fd++) close(fd);
    } else if (!strcmp(how, "closefrom")) {
        closefrom(3);
    } else if (!strcmp(how, "close_range")) {
        if (syscall(SYS_close_range, 3, ~0U, 0) != 0) perror("close_range");
    } else {
        fprintf(stderr, "unknown way %s\n", how);
        exit(2);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: closefds loop|closefrom|close_range|wait [FILE]\n");
        return 2;
    }
    work(1);
    close_all(argv[1]);
    if (!strcmp(argv[1], "wait")) {
        int in = open(argc > 2 ? argv[2] : argv[0], O_RDONLY);
        sleep(2);
        static unsigned char buf[1 << 16];
        long n = read(in, buf, sizeof buf), sum = 0;
        for (long i = 0; i < n; i++) sum += buf[i];
        printf("fd %d: %ld bytes, sum %ld\n", in, n, sum);
        return 0;
    }
    int fds[8];
    char name[32];
    for (int i = 0; i < 8; i++) {
        snprintf(name, sizeof name, "out%d.txt", i);
        fds[i] = open(name, O_RDWR | O_CREAT | O_TRUNC, 0644);
        dprintf(fds[i], "file %d\n", i);
    }
    work(2);
    for (int i = 0; i < 8; i++) dprintf(fds[i], "end %d\n", i);
    for (int i = 0; i < 8; i++) {
        char text[64] = {0};
        long n = pread(fds[i], text, sizeof text - 1, 0);
        printf("fd %d: %ld bytes: %s", fds[i], n, text);
        close(fds[i]);
    }
    printf("sum %lu\n", sink);
    return 0;
}
