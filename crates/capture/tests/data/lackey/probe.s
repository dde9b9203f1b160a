# Probe for how Valgrind lackey reports the accesses of the instructions the
# access model treats specially. run.sh assembles it, runs it under
# `valgrind --tool=lackey --trace-mem=yes` and writes probe.lackey.txt:
# each labelled instruction followed by the records lackey gave it.
# (xlat is missing: Valgrind 3.19 does not decode it.)
.intel_syntax noprefix
.globl _start
.bss
.align 64
buf: .zero 8192
.data
# maskmovdqu mask: bytes 0, 1, 4 and 15 selected.
bytemask: .byte 0x80, 0xff, 0, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x81
# vmaskmovps mask: elements 0, 1, 5, 6, 7 selected.
dwordmask: .long -1, -2, 0, 1, 0, 0x80000000, -9, -1
.text
_start:
  lea rdi, [rip+buf+2048]
  mov rcx, -1
i_bts: bts qword ptr [rdi], rcx
  mov rcx, -100
i_bt32: bt dword ptr [rdi], ecx
i_btimm: bt dword ptr [rdi], 37
  push 1
  push 2
i_pushm: push qword ptr [rsp+8]
i_popm: pop qword ptr [rsp]
  add rsp, 16
i_fxsave: fxsave [rdi]
i_fxrstor: fxrstor [rdi]
i_prefetch: prefetcht0 [rdi]
i_clflush: clflush [rdi]
i_movnti: movnti [rdi], rax
i_cmpxchg: lock cmpxchg [rdi], rcx
i_xadd: lock xadd [rdi], rcx
i_xchg: xchg [rdi], rcx
i_add: add qword ptr [rdi], 1
  lea rsi, [rdi+64]
i_movsb: movsb
  mov rcx, 3
i_rep: rep movsb
  mov rcx, 2
  std
i_repstd: rep stosq
  cld
  movdqu xmm2, [rip+bytemask]
  lea rdi, [rip+buf+2048]
i_maskmov: maskmovdqu xmm1, xmm2
i_cmpxchg16b: lock cmpxchg16b [rdi]
  lea rbx, [rdi]
  mov eax, 5
# (xlat here: VEX cannot decode it)
i_enter: enter 16, 0
i_leave: leave
i_call: call f
  vpcmpeqd ymm2, ymm2, ymm2
  vpxor ymm1, ymm1, ymm1
i_gather: vpgatherdd ymm0, [rdi+ymm1*4], ymm2
  vmovdqu ymm1, [rip+dwordmask]
i_vmaskmov: vmaskmovps [rdi], ymm1, ymm0
i_movdqu: vmovdqu ymmword ptr [rdi+1], ymm0
i_push: push rax
i_pop: pop rax
  mov eax, 7
  xor edx, edx
i_xsave: xsave [rdi]
i_xrstor: xrstor [rdi]
  mov eax, 60
  xor edi, edi
  syscall
f:
i_ret: ret
