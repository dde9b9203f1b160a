/* A unit with a variable of its own beside opaque_b.c's `sum_nodes`, for
 * crates/types/tests/operand.rs (locals read only from the units a
 * capture's instructions lie in). Build: gcc -g -O2 units_a.c opaque_b.c */
struct Node;
int sum_nodes(const struct Node *n);

struct Pair {
    long a; /* 0 */
    long b; /* 8 */
};

struct Pair pair = {1, 2};
struct Pair *volatile where = &pair;

__attribute__((noinline)) long pair_sum(const struct Pair *p) {
    return p->a + p->b;
}

int main(void) {
    return (int)pair_sum(where) + sum_nodes((const struct Node *)0);
}
