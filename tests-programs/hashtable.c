/* hashtable.c - random inserts and lookups in an open-addressing hash table.
 *
 * Oracle test program for coldcache.  Linear probing over a power-of-two
 * table of 16-byte slots (256 KiB), keys from a fixed-seed PRNG: scattered,
 * mostly single-line accesses with short probe runs, plus read-modify-write
 * of the value field (Valgrind "M" records).
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

#define SLOTS (1u << 14)
#ifndef INSERTS /* a test may build a smaller run with -DINSERTS=... */
#define INSERTS 10000
#endif
#ifndef LOOKUPS /* a test may build a smaller run with -DLOOKUPS=... */
#define LOOKUPS 20000
#endif

struct slot {
    uint64_t key; /* 0 = empty */
    uint64_t value;
};

static uint64_t rng_state = 0x0123456789ABCDEFull;

static uint64_t rng(void)
{
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return (uint32_t)k & (SLOTS - 1);
}

static struct slot *table;

static void insert(uint64_t key, uint64_t value)
{
    uint32_t i = hash(key);
    while (table[i].key != 0 && table[i].key != key)
        i = (i + 1) & (SLOTS - 1);
    table[i].key = key;
    table[i].value += value;
}

static struct slot *lookup(uint64_t key)
{
    uint32_t i = hash(key);
    while (table[i].key != 0) {
        if (table[i].key == key)
            return &table[i];
        i = (i + 1) & (SLOTS - 1);
    }
    return NULL;
}

int main(void)
{
    table = calloc(SLOTS, sizeof *table);
    if (!table)
        return 1;
    for (int n = 0; n < INSERTS; n++)
        insert((rng() % 50000) + 1, (uint64_t)n);
    uint64_t found = 0, missing = 0, acc = 0;
    for (int n = 0; n < LOOKUPS; n++) {
        struct slot *s = lookup((rng() % 25000) + 1);
        if (s) {
            found++;
            s->value++; /* read-modify-write */
            acc += s->value;
        } else {
            missing++;
        }
    }
    printf("hashtable found=%llu missing=%llu acc=%llu\n", (unsigned long long)found,
           (unsigned long long)missing, (unsigned long long)acc);
    free(table);
    return 0;
}
