/* listchase.c - pointer chasing over a shuffled singly linked list.
 *
 * Oracle test program for coldcache.  Nodes live in one array but are linked
 * in a random (fixed-seed) order, so every hop is a dependent load to an
 * unpredictable line.  The node layout is packed so that the 8-byte payload
 * of some nodes straddles a cache-line boundary (exercises the "one access,
 * two lines" rule).
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>

#define NODES 8192
#ifndef LAPS /* a test may build a smaller run with -DLAPS=... */
#define LAPS 6
#endif

struct __attribute__((packed)) node {
    struct node *next; /* 8 bytes */
    uint8_t tag;       /* 1 byte: makes the node 29 bytes, so fields drift */
    uint64_t payload;  /* unaligned 8-byte field */
    uint32_t visits;
    uint64_t pad;
};

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
    /* xorshift64* */
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

int main(void)
{
    struct node *nodes = malloc(sizeof(struct node) * NODES);
    uint32_t *order = malloc(sizeof(uint32_t) * NODES);
    if (!nodes || !order)
        return 1;
    for (uint32_t i = 0; i < NODES; i++) {
        order[i] = i;
        nodes[i].tag = (uint8_t)i;
        nodes[i].payload = (uint64_t)i * 2654435761u;
        nodes[i].visits = 0;
        nodes[i].pad = 0;
    }
    /* Fisher-Yates shuffle with a fixed seed */
    for (uint32_t i = NODES - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(rng() % (i + 1));
        uint32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    for (uint32_t i = 0; i < NODES; i++)
        nodes[order[i]].next = &nodes[order[(i + 1) % NODES]];

    uint64_t sum = 0;
    struct node *p = &nodes[order[0]];
    for (int lap = 0; lap < LAPS; lap++) {
        for (uint32_t i = 0; i < NODES; i++) {
            sum += p->payload ^ p->tag;
            p->visits++;
            p = p->next;
        }
    }
    printf("listchase nodes=%d laps=%d sum=%llu visits0=%u\n", NODES, LAPS,
           (unsigned long long)sum, nodes[0].visits);
    free(order);
    free(nodes);
    return 0;
}
