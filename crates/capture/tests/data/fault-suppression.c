/* Which AVX-512 {k}-masked memory operands skip their masked-off elements?
 * The operand straddles a PROT_NONE page with only the readable half
 * enabled: a fault means masked elements are read (no fault suppression).
 * Build: gcc -O1 -mavx512f -mavx512bw -o fault-suppression fault-suppression.c
 * Output on the development machine (Intel Xeon, KVM):
 *   vaddps     ok (suppressed)
 *   vpermd     FAULT (masked elements accessed)
 *   vmovups    ok (suppressed)
 *   vpmovzxbd  ok (suppressed)
 *   vpaddd     ok (suppressed)
 *   vpshufb    FAULT (masked elements accessed)
 */
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <string.h>
static int run(const char *name, int which) {
  pid_t p = fork();
  if (p == 0) {
    char *m = mmap(0, 8192, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
    mprotect(m + 4096, 4096, PROT_NONE);
    char *op = m + 4096 - 32; /* first 8 dwords readable, last 8 not */
    unsigned int k = 0x00ff;
    __asm__ volatile("kmovw %0, %%k1" :: "r"(k) : "k1");
    if (which == 0) __asm__ volatile("vaddps (%0), %%zmm1, %%zmm0%{%%k1%}" :: "r"(op) : "xmm0");
    if (which == 1) __asm__ volatile("vpermd (%0), %%zmm1, %%zmm0%{%%k1%}" :: "r"(op) : "xmm0");
    if (which == 2) __asm__ volatile("vmovups (%0), %%zmm0%{%%k1%}" :: "r"(op) : "xmm0");
    if (which == 3) __asm__ volatile("vpmovzxbd (%0), %%zmm0%{%%k1%}" :: "r"(m + 4096 - 8) : "xmm0");
    if (which == 4) __asm__ volatile("vpaddd (%0), %%zmm1, %%zmm0%{%%k1%}" :: "r"(op) : "xmm0");
    if (which == 5) __asm__ volatile("vpshufb (%0), %%zmm1, %%zmm0%{%%k1%}" :: "r"(op) : "xmm0");
    _exit(0);
  }
  int st; waitpid(p, &st, 0);
  printf("%-10s %s\n", name, WIFSIGNALED(st) ? "FAULT (masked elements accessed)" : "ok (suppressed)");
  return 0;
}
int main() { run("vaddps", 0); run("vpermd", 1); run("vmovups", 2); run("vpmovzxbd", 3); run("vpaddd", 4); run("vpshufb",5); }
