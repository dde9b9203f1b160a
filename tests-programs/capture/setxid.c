// A threaded program that calls setuid() in a loop: glibc makes every
// thread of the process change its ids too, by signalling each with
// SIGSETXID and waiting for all of them, the capture's own threads
// included. A thread of ours that blocked SIGSETXID would hang the
// program's setuid for ever. `setxid N`: N calls; prints "ok" and the sum.
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
static volatile int stop;
static void *spin(void *a) { unsigned long n = 0; while (!stop) n++; return (void *)n; }
int work(int k) { int s = 0; for (int i = 0; i < k; i++) { if (setuid(getuid()) != 0) { perror("setuid"); exit(3);} s += i; } return s; }
int main(int argc, char **argv) {
  pthread_t t; pthread_create(&t, 0, spin, 0);
  int s = work(argc > 1 ? atoi(argv[1]) : 50);
  stop = 1; pthread_join(t, 0);
  printf("ok %d\n", s);
  return 0;
}
