/* jit.c - hostile-program test: a JIT that reuses its code buffer.
 *
 * Writes a function into an anonymous RWX buffer, calls it, rewrites the
 * same bytes with another function (with system calls in between, as a JIT
 * that frees and reuses a buffer makes), and calls it again, a few rounds.
 * The second function puts a 2-byte instruction where the first had its
 * `syscall`, and runs with RAX = 14 (rt_sigprocmask) and R10 = 8: a capture
 * that trusted its first decode of that address would "emulate" a system
 * call that is not there and change the result.
 *
 * Then, with no system call in between, the same bytes are rewritten once
 * more (another constant) and called: a decode or translation trusted
 * since the last system call would return the old value.
 *
 * Prints each result; the output must be the same captured or not.
 * Usage: jit   (captured with `coldcache record --all`)
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* mov eax, 39 (getpid); syscall; ret */
static const unsigned char getpid_code[] = {0xB8, 0x27, 0, 0, 0, 0x0F, 0x05, 0xC3};
/* mov eax, 14; inc eax; ret */
static const unsigned char fifteen_code[] = {0xB8, 0x0E, 0, 0, 0, 0xFF, 0xC0, 0xC3};
/* mov eax, 15; inc eax; ret */
static const unsigned char sixteen_code[] = {0xB8, 0x0F, 0, 0, 0, 0xFF, 0xC0, 0xC3};

static long call_with_r10_8(void *fn)
{
    long r;
    __asm__ volatile("mov $8, %%r10\n\tcall *%1"
                     : "=a"(r)
                     : "r"(fn)
                     : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory");
    return r;
}

int main(void)
{
    unsigned char *buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    long pid = getpid();
    for (int round = 0; round < 3; round++) {
        memcpy(buf, getpid_code, sizeof getpid_code);
        long a = call_with_r10_8(buf);
        /* A system call between the two versions, as a real JIT makes. */
        mprotect(buf, 4096, PROT_READ | PROT_WRITE | PROT_EXEC);
        memcpy(buf, fifteen_code, sizeof fifteen_code);
        long b = call_with_r10_8(buf);
        /* Rewritten in place with no system call since the last run. */
        memcpy(buf, sixteen_code, sizeof sixteen_code);
        long c = call_with_r10_8(buf);
        printf("round %d: getpid %s, fifteen %ld, sixteen %ld\n", round, a == pid ? "ok" : "wrong", b, c);
    }
    return 0;
}
