/* A declaration resolved by name in another unit (crates/types/tests/
 * layouts.rs): this unit only declares `struct Node`; opaque_b.c defines
 * it. Build: gcc -g -O2 opaque_a.c opaque_b.c */
struct Node;
struct Node *head;
int sum_nodes(const struct Node *n);

int main(void) {
    return sum_nodes(head);
}
