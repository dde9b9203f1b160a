/* faultthrow.cpp - a C++ exception thrown from a SIGSEGV handler
 * (-fnon-call-exceptions), the handler reading the interrupted RIP first
 * (issue 33).
 *
 * Usage: faultthrow run   (built with -fnon-call-exceptions)
 * `work` loads through a pointer 200 times in `load_at`, whose frame holds
 * a destructor; every other pointer is a PROT_NONE page. The SIGSEGV
 * handler finds RIP's object with dladdr and throws its offset there; the
 * unwinder goes through the signal frame into `load_at` (the destructor
 * runs) and the exception is caught in `work`. Prints the same lines with
 * and without capture: in fast mode the handler saw a code-cache RIP (no
 * object: status 3), and the unwinder found no frame there (abort, 134).
 */
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

struct Fault {
    unsigned long offset;
};

static long unwound;
static long good[64];
static long *bad;

static void on_segv(int, siginfo_t *, void *ctx) {
    ucontext_t *uc = static_cast<ucontext_t *>(ctx);
    unsigned long rip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
    Dl_info info;
    if (!dladdr((void *)rip, &info) || !info.dli_fname) {
        char buf[80];
        snprintf(buf, sizeof buf, "RIP %#lx: no object\n", rip);
        ssize_t r = write(1, buf, strlen(buf));
        (void)r;
        _exit(3);
    }
    throw Fault{rip - (unsigned long)info.dli_fbase};
}

struct Guard {
    ~Guard() { unwound++; }
};

__attribute__((noinline)) long load_at(volatile long *p) {
    Guard g;
    return *p;
}

extern "C" __attribute__((noinline)) long work() {
    long sum = 0, caught = 0;
    unsigned long offset = 0;
    for (int i = 0; i < 200; i++) {
        try {
            sum += load_at(i % 2 ? bad + i % 64 : &good[i % 64]);
        } catch (const Fault &f) {
            caught++;
            if (offset == 0)
                offset = f.offset;
            else if (f.offset != offset)
                printf("fault %d at +%#lx, the first at +%#lx\n", i, f.offset, offset);
        }
    }
    printf("sum %ld, caught %ld, unwound %ld, fault at +%#lx\n", sum, caught, unwound, offset);
    return sum;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    bad = (long *)mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (bad == MAP_FAILED)
        return 2;
    for (int i = 0; i < 64; i++)
        good[i] = 3 * i + 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, nullptr);
    work();
    return 0;
}
