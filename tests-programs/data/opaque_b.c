/* The definition of the `struct Node` that opaque_a.c only declares. */
#include <stddef.h>

struct Node {
    int value;          /* 0 */
    struct Node *next;  /* 8 */
};

int sum_nodes(const struct Node *n) {
    int s = 0;
    for (; n != NULL; n = n->next)
        s += n->value;
    return s;
}
