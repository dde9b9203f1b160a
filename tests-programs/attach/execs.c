/* A program that replaces itself with `execv` while `coldcache attach`
 * waits for its capture (crates/cli/tests/attach.rs): it prints "ready",
 * waits for a line on stdin, then runs itself again with the argument
 * `again`, which prints "again" and reads stdin until it is closed. The
 * attach's function, `never_called`, is never called: the library and its
 * armed capture go with the old image. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) int never_called(int x) { return x * 3 + 1; }

int main(int argc, char **argv) {
    char buf[64];
    if (argc > 1 && strcmp(argv[1], "again") == 0) {
        printf("again\n");
        fflush(stdout);
        while (read(0, buf, sizeof buf) > 0) {}
        return 0;
    }
    printf("ready\n");
    fflush(stdout);
    if (read(0, buf, sizeof buf) <= 0) return never_called(argc);
    char *args[] = {argv[0], "again", NULL};
    execv("/proc/self/exe", args);
    perror("execv");
    return 1;
}
