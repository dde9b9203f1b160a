/* pushbuffer.c - the CacheSim talk's first example: a hot 16-bit flag that
 * drifted from the hot cache line of an object into its cold part.
 *
 * Each frame, build_push_buffer() walks every texture, checks its VISIBLE
 * flag and, for the visible ones (three out of four), copies the GPU address
 * and size into a small push buffer. A texture is three cache lines: one hot
 * line with what this loop reads, two cold lines for loading and debugging.
 * During maintenance `flags` ended up in the cold part and the cold
 * `debug_id` in the hot line, so the loop touches two lines per visible
 * texture where one would do: 1.75 lines per texture instead of 1. With 768
 * textures a frame touches 1344 lines (84 KiB), more than a 64 KiB L2 holds,
 * and the L2 misses on most of them every frame (the talk: 2,800 L2 misses
 * a frame on that flag). Swapping the two fields (build with -DFIXED) brings
 * the frame down to 768 lines (48 KiB), which fit: after the first frame the
 * loop no longer misses at all.
 *
 * Run: coldcache record --cache examples/caches/talk-scaled.toml \
 *        --function run_frames -- ./pushbuffer
 *      coldcache report coldcache.ccdump --by line
 */
#include <stdint.h>
#include <stdio.h>

#define N 768
#define FRAMES 8
#define VISIBLE 0x1

struct texture {
    /* hot: read by build_push_buffer every frame (one 64-byte line) */
    uint64_t gpu_address;
    uint32_t width, height, format, mip_count;
#ifdef FIXED
    uint16_t flags;
#else
    uint16_t debug_id;
#endif
    uint8_t hot_reserved[38];
    /* cold: loading, streaming, debugging (two lines) */
    char name[96];
    uint64_t file_offset;
    uint32_t file_size, refcount;
#ifdef FIXED
    uint16_t debug_id;
#else
    uint16_t flags;
#endif
    uint8_t cold_reserved[14];
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct texture) == 192, "three cache lines");

static struct texture textures[N];
static uint64_t push_buffer[64];

__attribute__((noinline)) static unsigned build_push_buffer(const struct texture *t, int n)
{
    unsigned emitted = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].flags & VISIBLE) {
            uint64_t *pb = &push_buffer[(emitted * 2) % 64];
            pb[0] = t[i].gpu_address;
            pb[1] = ((uint64_t)t[i].width << 32) | t[i].height;
            emitted++;
        }
    }
    return emitted;
}

__attribute__((noinline)) unsigned run_frames(void)
{
    unsigned total = 0;
    for (int f = 0; f < FRAMES; f++)
        total += build_push_buffer(textures, N);
    return total;
}

int main(void)
{
    for (int i = 0; i < N; i++) {
        textures[i].gpu_address = 0x100000000ull + (uint64_t)i * 4096;
        textures[i].width = 256;
        textures[i].height = 128;
        textures[i].debug_id = (uint16_t)i;
        textures[i].flags = (i % 4 != 3) ? VISIBLE : 0;
    }
    unsigned total = run_frames();
    printf("flags at offset %zu, %u draws, last %llx\n",
           __builtin_offsetof(struct texture, flags), total,
           (unsigned long long)push_buffer[0]);
    return 0;
}
