// Objects (issue 32): heap blocks by allocation site, a global table, a
// stack array, with access counts known from the source. One case per
// run, chosen by argv[1]; each case is one noinline function, the
// capture's window (`record --objects --function CASE`), which does its
// own allocations, so the allocator is observed in the window.
//
// Every field the counts rest on is `volatile`: one load or store per
// source access at any optimisation level. Built with `-z now` (the tests
// do): the GOT then lies in the read-only RELRO part, so the executable's
// writable data mapping holds only `.data` and `.bss`.
//
// - getposition [N] (the talk's GetPosition): a pointer array of N
//   (default 12,000; malloc, one block of 8 N bytes) and N objects of 128 bytes (each
//   its own malloc: one site, N blocks); one float read from each object,
//   in a scattered order (i * 7919 mod N, a permutation for N prime to
//   7919). Between the
//   allocations and the reads, 64 KiB of a global buffer are read, a line
//   at a time: every line the allocator touched leaves the 32 KiB 8-way
//   first data level (each set sees 16 newer lines). By hand: the
//   objects' site: N blocks, 128 N bytes, N accesses, all reads, and N
//   first-level misses (each object's float lies in a line no other access
//   of the window reads: glibc's chunks of 144 bytes). The pointer array:
//   1 block, N writes (filled), 2 N reads (read, then read to free).
// - global: 1,000 reads of an initialised global table (`.data`): the
//   global `table`, 1,000 reads, none left to the executable's data
//   mapping.
// - globals (globals reached through pointers, and a static): `hot`
//   (256 ints, .bss) summed once and `cold` (512 ints, .data, static)
//   twice by a function given a pointer, and a function-local static
//   `calls` read and written once. Each array is 64-byte aligned, so
//   `hot` spans 16 lines and `cold` 32, and the window starts with empty
//   caches: `hot` 256 reads, 16 first-level misses; `cold` 1,024 reads,
//   32 misses (its second pass hits: 2 KiB stay in the first level);
//   `calls` 1 read (a miss) and 1 write. The executable's data mappings
//   keep no access.
// - stack: a 256-int stack array written then read: the frame of
//   `stack()`, 256 writes, 256 reads and the `ret`'s read of its return
//   address, and every access of the window.
// - frames: `frames()` has a 64-int local array that `fill()` (its
//   callee) writes through a pointer and `frames()` then reads: 64 writes
//   by `fill` and 64 reads counted in the frame of `frames()` (the frame
//   holding the address, not the function running), plus `frames()`'s
//   own return address read by its `ret`, the call's push of `fill`'s
//   return address and `fill`'s `ret` reading it.
// - realloc: malloc(400), 100 int writes, realloc to 4,000, 1,000 int
//   writes, free: the malloc site 100 writes, the realloc site 1,000
//   writes (one block, moved or grown: the writes after it are the
//   realloc site's either way).
// - reuse: malloc(256), 10 writes, free, malloc(256) again (glibc gives
//   the same address back), 20 writes, free: two sites, 10 and 20 writes.
// - new: `new V` (8 volatile ints), 8 writes and 8 reads, `delete`: the
//   site of `new`, one block of 32 bytes, 16 accesses.
// - scene [N] (the site's type and fields): `getposition` with a typed
//   object, visited through a local pointer (`const Scene *o`, which the
//   resolver types through DWARF's location of `o`). N `new Scene` (128
//   bytes: `pos.x/y/z` at +96..+107, `id` at +0), each `id` written once
//   when made; the same eviction pass; then `pos.x`, `pos.y`, `pos.z` read
//   once each per object in the scattered order. By hand, the `new Scene`
//   site: N blocks, 4 N accesses, all by instructions typed `Scene`:
//   `Scene::id` N writes; `Scene::pos.x` N reads and N first-level misses
//   (as getposition's `x`: no other object's bytes share its line, and
//   the eviction pass left none of them cached); `Scene::pos.y` and
//   `Scene::pos.z` N reads, no misses (x's line, just fetched). `id`
//   misses in N / 4 objects: chunks are 144 bytes apart, so one object
//   in four starts a line, which nothing touched before `id` (the
//   allocator's writes, the chunk's size at -8 and the rest of the heap's
//   at +136, lie in the line before and in the next object's); in the
//   others malloc has just written the size word of `id`'s line. `pos` is
//   never written (fresh heap memory: zeros, so the program prints 0.0).
//   The pointer array (`new Scene *[n]`): N writes (scene_make), N reads
//   (scene_visit), N reads (the delete loop).
// - earlier [N] (blocks allocated before the window, typed by the
//   instructions that touch them): `main` makes the pointer array and N
//   Scenes (scene_make), then the window is `scene_visit` alone. No
//   allocation is seen: every access is in the heap allocated earlier
//   (the brk heap: all blocks are small), 4 N reads: `Scene::pos.x`,
//   `pos.y`, `pos.z` N each and the array N (`*objs`, typed `Scene*`);
//   3 N of the 4 N typed accesses are `Scene`'s, so the heap's type is
//   `Scene`.
// - mapped (mappings made in the window): `mmap` of 64 KiB, one byte
//   written per line (1,024 writes); `mremap` of it to 128 KiB (the same
//   mapping, moved or grown); one byte read per line of the 128 KiB
//   (2,048 reads); `munmap` of its first half, the second half's lines
//   read again (1,024 reads); `munmap` of the rest. By hand, the site of
//   the `mmap` call (an `mmap` row): 1 mapping, 131,072 bytes (64 KiB
//   mapped, 64 KiB added by mremap), unmapped whole, 4,096 accesses:
//   1,024 writes, 3,072 reads. Then `malloc(1 MiB)`, which glibc serves
//   with a mapping of its own: its site 1 block, 16 writes (one per line
//   of its first KiB), freed; the accesses malloc and free make in the
//   chunk's header go to the mapping malloc made (`mmap by malloc`).
//   Nothing is left to "mapped during the capture". Prints 1024 (the
//   first half's ones).
// - threadframes: `frames` run on a thread `main` starts (its stack
//   mapped after the capture's start, no mapping of it): the same
//   figures as `frames`.
// - late LIB: the window `late` loads LIB (late.c built as a shared
//   library) with dlopen and calls its late_sum: its data, mapped by the
//   dynamic linker during the capture, is named at the capture's end:
//   the global late_table 256 reads (16 first-level misses), late_calls 1
//   read and 1 write; nothing left to "mapped during the capture".
//   Prints 0.
// - premapped (memory mapped before the window): `main` maps 64 KiB and
//   writes a 1 in each line, then the window is `visit`, which reads each
//   line once: 1,024 reads, all in the row of the memory mapped after
//   the capture's start and before the window; nothing left to "mapped
//   during the capture". Prints 1024.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>

struct Obj {
    char pad[96];
    volatile float x;  // +96
    char rest[28];
};
static_assert(sizeof(Obj) == 128, "two cache lines");

const int N = 12000;

static volatile char evict[64 * 1024];

__attribute__((noinline)) float getposition(int n) {
    Obj *volatile *ptrs = static_cast<Obj *volatile *>(malloc(n * sizeof(Obj *)));
    for (int i = 0; i < n; ++i) {
        ptrs[i] = static_cast<Obj *>(malloc(sizeof(Obj)));
    }
    for (int i = 0; i < int(sizeof evict); i += 64) {
        (void)evict[i];
    }
    float s = 0;
    for (int i = 0; i < n; ++i) {
        s += ptrs[(long(i) * 7919) % n]->x;
    }
    for (int i = 0; i < n; ++i) {
        free(ptrs[i]);
    }
    free((void *)ptrs);
    return s;
}

volatile int table[1000] = {1, 2, 3};

__attribute__((noinline)) int global() {
    int s = 0;
    for (int i = 0; i < 1000; ++i) {
        s += table[i];
    }
    return s;
}

alignas(64) volatile int hot[256];
alignas(64) static volatile int cold[512] = {1};

__attribute__((noinline)) int sum_of(volatile int *p, int n) {
    int s = 0;
    for (int i = 0; i < n; ++i) {
        s += p[i];
    }
    return s;
}

__attribute__((noinline)) int globals() {
    static volatile long calls;
    calls = calls + 1;
    return sum_of(hot, 256) + sum_of(cold, 512) + sum_of(cold, 512);
}

__attribute__((noinline)) void fill(volatile int *p, int n) {
    for (int i = 0; i < n; ++i) {
        p[i] = i;
    }
}

__attribute__((noinline)) int frames() {
    volatile int a[64];
    fill(a, 64);
    int s = 0;
    for (int i = 0; i < 64; ++i) {
        s += a[i];
    }
    return s;
}

__attribute__((noinline)) int stack() {
    volatile int a[256];
    for (int i = 0; i < 256; ++i) {
        a[i] = i;
    }
    int s = 0;
    for (int i = 0; i < 256; ++i) {
        s += a[i];
    }
    return s;
}

__attribute__((noinline)) int grow() {
    volatile int *p = static_cast<volatile int *>(malloc(100 * sizeof(int)));
    for (int i = 0; i < 100; ++i) {
        p[i] = i;
    }
    p = static_cast<volatile int *>(realloc((void *)p, 1000 * sizeof(int)));
    for (int i = 0; i < 1000; ++i) {
        p[i] = i;
    }
    int s = p[0] == 0;
    free((void *)p);
    return s;
}

__attribute__((noinline)) int reuse() {
    volatile int *a = static_cast<volatile int *>(malloc(256));
    for (int i = 0; i < 10; ++i) {
        a[i] = i;
    }
    free((void *)a);
    volatile int *b = static_cast<volatile int *>(malloc(256));
    for (int i = 0; i < 20; ++i) {
        b[i] = i;
    }
    int same = a == b;
    free((void *)b);
    return same;
}

// posix_memalign gives its block through memory: fifty blocks through one
// out slot, each written four times, all freed at the end.
static void *volatile aligned_keep[50];

__attribute__((noinline)) int aligned() {
    void *slot;
    for (int i = 0; i < 50; ++i) {
        if (posix_memalign(&slot, 64, 256) != 0) {
            return -1;
        }
        volatile int *p = static_cast<volatile int *>(slot);
        for (int k = 0; k < 4; ++k) {
            p[k] = k;
        }
        aligned_keep[i] = slot;
    }
    for (int i = 0; i < 50; ++i) {
        free(aligned_keep[i]);
    }
    return 50;
}

struct V {
    volatile int a[8];
};

__attribute__((noinline)) int with_new() {
    V *v = new V;
    for (int i = 0; i < 8; ++i) {
        v->a[i] = i;
    }
    int s = 0;
    for (int i = 0; i < 8; ++i) {
        s += v->a[i];
    }
    delete v;
    return s;
}

struct Vec3 {
    volatile float x, y, z;
};

struct Scene {
    volatile int id;  // +0
    char pad[92];
    Vec3 pos;  // +96..+107
    char rest[20];
};
static_assert(sizeof(Scene) == 128, "two cache lines");

__attribute__((noinline)) void scene_make(Scene **objs, int n) {
    for (int i = 0; i < n; ++i) {
        Scene *o = new Scene;
        o->id = i;
        objs[i] = o;
    }
}

__attribute__((noinline)) float scene_visit(Scene *const *objs, int n) {
    float s = 0;
    for (int i = 0; i < n; ++i) {
        const Scene *o = objs[(long(i) * 7919) % n];
        s += o->pos.x + o->pos.y + o->pos.z;
    }
    return s;
}

__attribute__((noinline)) float scene(int n) {
    Scene **objs = new Scene *[n];
    scene_make(objs, n);
    for (int i = 0; i < int(sizeof evict); i += 64) {
        (void)evict[i];
    }
    float s = scene_visit(objs, n);
    for (int i = 0; i < n; ++i) {
        delete objs[i];
    }
    delete[] objs;
    return s;
}

__attribute__((noinline)) long mapped() {
    const long K = 64 * 1024;
    volatile char *p = (volatile char *)mmap(nullptr, K, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // the mapping's site
    if (p == MAP_FAILED) {
        return -1;
    }
    for (long i = 0; i < K; i += 64) {
        p[i] = 1;
    }
    p = (volatile char *)mremap((void *)p, K, 2 * K, MREMAP_MAYMOVE);
    if (p == MAP_FAILED) {
        return -1;
    }
    long s = 0;
    for (long i = 0; i < 2 * K; i += 64) {
        s += p[i];
    }
    munmap((void *)p, K);
    for (long i = K; i < 2 * K; i += 64) {
        s += p[i];
    }
    munmap((void *)(p + K), K);
    volatile char *big = (volatile char *)malloc(1 << 20);  // the large block's site
    for (long i = 0; i < 1024; i += 64) {
        big[i] = 2;
    }
    free((void *)big);
    return s;
}

__attribute__((noinline)) long visit(volatile char *p, long n) {
    long s = 0;
    for (long i = 0; i < n; i += 64) {
        s += p[i];
    }
    return s;
}

// The library of `late` (late.c), loaded and run inside the window.
__attribute__((noinline)) int late(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        std::fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(2);
    }
    auto sum = reinterpret_cast<int (*)()>(dlsym(lib, "late_sum"));
    return sum == nullptr ? -1 : sum();
}

static void *run_frames(void *out) {
    *(int *)out = frames();
    return nullptr;
}

int main(int argc, char **argv) {
    const char *c = argc > 1 ? argv[1] : "";
    // The heap made before the window: its first allocation's sbrk is not
    // in it (under Valgrind the break moves differently, and so would the
    // allocator's first instructions).
    free(malloc(1));
    if (!strcmp(c, "getposition")) {
        std::printf("%.1f\n", getposition(argc > 2 ? atoi(argv[2]) : N));
    } else if (!strcmp(c, "global")) {
        std::printf("%d\n", global());
    } else if (!strcmp(c, "globals")) {
        std::printf("%d\n", globals());
    } else if (!strcmp(c, "late") && argc > 2) {
        std::printf("%d\n", late(argv[2]));
    } else if (!strcmp(c, "frames")) {
        std::printf("%d\n", frames());
    } else if (!strcmp(c, "stack")) {
        std::printf("%d\n", stack());
    } else if (!strcmp(c, "realloc")) {
        std::printf("%d\n", grow());
    } else if (!strcmp(c, "reuse")) {
        std::printf("same address: %d\n", reuse());
    } else if (!strcmp(c, "memalign")) {
        std::printf("%d\n", aligned());
    } else if (!strcmp(c, "new")) {
        std::printf("%d\n", with_new());
    } else if (!strcmp(c, "scene")) {
        std::printf("%.1f\n", scene(argc > 2 ? atoi(argv[2]) : N));
    } else if (!strcmp(c, "mapped")) {
        std::printf("%ld\n", mapped());
    } else if (!strcmp(c, "threadframes")) {
        pthread_t t;
        int r = 0;
        if (pthread_create(&t, nullptr, run_frames, &r) != 0 || pthread_join(t, nullptr) != 0) {
            return 1;
        }
        std::printf("%d\n", r);
    } else if (!strcmp(c, "premapped")) {
        const long K = 64 * 1024;
        volatile char *p = (volatile char *)mmap(nullptr, K, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return 1;
        }
        for (long i = 0; i < K; i += 64) {
            p[i] = 1;
        }
        std::printf("%ld\n", visit(p, K));
    } else if (!strcmp(c, "earlier")) {
        int n = argc > 2 ? atoi(argv[2]) : N;
        Scene **objs = new Scene *[n];
        scene_make(objs, n);
        std::printf("%.1f\n", scene_visit(objs, n));
    } else {
        std::fprintf(stderr, "usage: objects getposition|global|globals|late LIB|frames|stack|realloc|reuse|memalign|new|scene|mapped|premapped|threadframes|earlier\n");
        return 2;
    }
    return 0;
}
