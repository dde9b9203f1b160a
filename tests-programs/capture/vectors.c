/* vectors.c - capture test program: loops of instructions whose accesses
 * depend on vector or opmask registers (fast mode records them).
 *
 * Usage: vectors KERNEL
 *   gather    AVX2 vpgatherdd/vgatherdps/vpgatherqq with vector masks
 *   maskmov   AVX2 vpmaskmovd/vmaskmovps loads and stores, maskmovdqu
 *   avx512    AVX-512BW masked moves, masked compares with memory
 *             operands, a gather and a scatter (prints "no avx512bw" and
 *             runs nothing where the CPU lacks it)
 * Prints a checksum of what the kernel computed.
 *
 * Built by the tests with: gcc -O1 -g -fno-pie -no-pie -mavx2 ...
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define K __attribute__((noinline, aligned(64)))

static int32_t table[4096] __attribute__((aligned(64)));
static int64_t table64[2048] __attribute__((aligned(64)));
static float ftable[4096] __attribute__((aligned(64)));
static int32_t out[4096] __attribute__((aligned(64)));
static char bytes[8192] __attribute__((aligned(64)));

K int64_t k_gather(void) {
    __m256i acc = _mm256_setzero_si256();
    __m256 facc = _mm256_setzero_ps();
    __m256i idx = _mm256_setr_epi32(0, 97, 13, 1031, 2047, 5, 3001, 640);
    __m256i step = _mm256_set1_epi32(37);
    __m256i limit = _mm256_set1_epi32(4095);
    for (int i = 0; i < 400; i++) {
        /* a mask that changes every iteration: elements whose index is odd */
        __m256i mask = _mm256_slli_epi32(idx, 31);
        acc = _mm256_add_epi32(acc, _mm256_mask_i32gather_epi32(acc, table, idx, mask, 4));
        facc = _mm256_add_ps(
            facc, _mm256_mask_i32gather_ps(facc, ftable, idx, _mm256_castsi256_ps(mask), 4));
        __m256i q = _mm256_srli_epi64(idx, 33);
        __m256i qidx = _mm256_and_si256(_mm256_add_epi64(_mm256_and_si256(idx, _mm256_set1_epi64x(2047)), q),
                                        _mm256_set1_epi64x(2047));
        acc = _mm256_add_epi32(acc, _mm256_i64gather_epi64((const long long *)table64, qidx, 8));
        idx = _mm256_and_si256(_mm256_add_epi32(idx, step), limit);
    }
    int32_t a[8];
    float f[8];
    _mm256_storeu_si256((__m256i *)a, acc);
    _mm256_storeu_ps(f, facc);
    int64_t s = 0;
    for (int i = 0; i < 8; i++) s += a[i] + (int64_t)f[i];
    return s;
}

K int64_t k_maskmov(void) {
    int64_t s = 0;
    for (int i = 0; i < 300; i++) {
        int n = i % 9; /* 0..8 elements enabled: a loop tail */
        __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
        int at = (i * 24) % 4000;
        __m256i v = _mm256_maskload_epi32(table + at, mask);
        __m256 fv = _mm256_maskload_ps(ftable + at, mask);
        _mm256_maskstore_epi32(out + at, mask, _mm256_add_epi32(v, _mm256_set1_epi32(i)));
        _mm256_maskstore_ps((float *)out + ((at + 48) & 4095) - ((at + 48) & 7), mask, fv);
        __m128i bm = _mm_cmpgt_epi8(_mm_set1_epi8((char)(i % 17)),
                                    _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
        _mm_maskmoveu_si128(_mm_set1_epi8((char)i), bm, bytes + (i * 40) % 8000);
        s += _mm256_extract_epi32(v, 0) + _mm256_extract_epi32(v, 7);
    }
    for (int i = 0; i < 4096; i += 61) s += out[i];
    for (int i = 0; i < 8192; i += 67) s += bytes[i];
    return s;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) K int64_t k_avx512(void) {
    int64_t s = 0;
    for (int i = 0; i < 200; i++) {
        int at = (i * 40) % 8000;
        __mmask64 m = (i % 64) ? ((1ULL << (i % 64)) - 1) : ~0ULL; /* a tail */
        __m512i v = _mm512_maskz_loadu_epi8(m, bytes + at);
        __mmask64 eq = _mm512_mask_cmpeq_epi8_mask(m, v, _mm512_set1_epi8(3));
        __mmask32 ne = _mm256_mask_cmpneq_epu8_mask((__mmask32)m, _mm256_set1_epi8(1),
                                                    _mm256_loadu_si256((void *)(bytes + at)));
        __mmask64 z = _mm512_mask_testn_epi8_mask(m, v, v);
        _mm512_mask_storeu_epi8(bytes + ((at + 4096) & 8191) - ((at + 4096) & 63), m,
                                _mm512_add_epi8(v, _mm512_set1_epi8(1)));
        __m512i idx = _mm512_and_si512(
            _mm512_add_epi32(_mm512_set1_epi32(i * 7),
                             _mm512_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90, 99, 108, 117, 126, 135)),
            _mm512_set1_epi32(4095));
        __mmask16 gm = (__mmask16)(0x5a5a >> (i % 5));
        __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), gm, idx, table, 4);
        _mm512_mask_i32scatter_epi32(out, (__mmask16)~gm, idx, g, 4);
        s += __builtin_popcountll(eq) + __builtin_popcount(ne) + __builtin_popcountll(z) +
             _mm512_reduce_add_epi32(g);
    }
    return s;
}

int main(int argc, char **argv) {
    for (int i = 0; i < 4096; i++) {
        table[i] = i * 3 + 1;
        ftable[i] = (float)(i % 100) * 0.5f;
        out[i] = 0;
    }
    for (int i = 0; i < 2048; i++) table64[i] = (int64_t)i * 1000003;
    for (int i = 0; i < 8192; i++) bytes[i] = (char)(i % 7);
    printf("start\n");
    const char *k = argc > 1 ? argv[1] : "gather";
    int64_t r;
    if (!strcmp(k, "gather")) {
        r = k_gather();
    } else if (!strcmp(k, "maskmov")) {
        r = k_maskmov();
    } else if (!strcmp(k, "avx512")) {
        __builtin_cpu_init();
        if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")) {
            printf("no avx512bw\n");
            return 0;
        }
        r = k_avx512();
    } else {
        fprintf(stderr, "unknown kernel %s\n", k);
        return 2;
    }
    printf("%s %lld\n", k, (long long)r);
    return 0;
}
