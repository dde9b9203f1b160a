# Varied x86-64 instructions for the model's no-allocation and no-panic tests.
# Assembled by build-varied.sh into varied.txt (hex bytes | disassembly).
.intel_syntax noprefix
push rax
push qword ptr [rsp+8]
pop qword ptr [rsp]
pop qword ptr [rsp+8]
pop word ptr [rsp]
pushfq
popfq
call qword ptr [rax]
call rel_target
rel_target:
ret
ret 16
enter 32, 0
enter 16, 3
leave
movsb
movsq
rep movsb
rep movsd
addr32 rep movsb
std
rep stosq
repe cmpsb
repne scasw
lodsd
insb
outsb
rep insd
lea rax, [rbx+rcx*4+16]
nop dword ptr [rax+rax*1+0]
nop word ptr cs:[rax+rax*1+0]
mov eax, dword ptr [rip+0x100]
mov rax, qword ptr fs:[0x28]
mov rax, qword ptr gs:[rbx+8]
bt dword ptr [rax], ecx
bts qword ptr [rax], rcx
btr word ptr [rax], cx
btc dword ptr [rax+4], edx
bt dword ptr [rax], 37
lock bts qword ptr [rax], rcx
prefetcht0 [rax]
prefetcht1 [rax+64]
prefetcht2 [rax]
prefetchnta [rax]
prefetchw [rax]
movnti qword ptr [rax], rbx
movntdq xmmword ptr [rax], xmm0
movntps xmmword ptr [rax], xmm1
movntpd xmmword ptr [rax], xmm1
vmovntdq ymmword ptr [rax], ymm2
vmovntps zmmword ptr [rax], zmm2
maskmovdqu xmm1, xmm2
vmaskmovdqu xmm1, xmm2
addr32 maskmovdqu xmm1, xmm2
clflush [rax]
clflushopt [rax]
clwb [rax]
movntdqa xmm0, xmmword ptr [rax]
fxsave [rax]
fxrstor [rax]
fxsave64 [rax]
xsave [rax]
xsave64 [rax]
xsaveopt [rax]
xsavec [rax]
xsaves [rax]
xrstor [rax]
xrstors [rax]
vpgatherdd ymm0, [rax+ymm1*4], ymm2
vpgatherqq ymm0, [rax+ymm1*8], ymm2
vpgatherdq ymm0, [rax+xmm1*8], ymm2
vpgatherqd xmm0, [rax+ymm1*4], xmm2
vgatherdps xmm0, [rax+xmm1*4+16], xmm2
vpgatherdd zmm0{k1}, [rax+zmm1*4]
vpgatherqq zmm0{k1}, [rax+zmm1*8]
vpgatherqd ymm0{k1}, [rax+zmm1*4]
vpscatterdd [rax+zmm1*4]{k1}, zmm0
vscatterqpd [rax+zmm1*8]{k1}, zmm0
vmaskmovps ymm0, ymm1, ymmword ptr [rax]
vmaskmovps ymmword ptr [rax], ymm1, ymm0
vpmaskmovq xmm0, xmm1, xmmword ptr [rax]
vpmaskmovd ymmword ptr [rax], ymm1, ymm0
vmovups zmm0{k1}, zmmword ptr [rax]
vmovups zmm0{k1}{z}, zmmword ptr [rax]
vmovups zmmword ptr [rax]{k1}, zmm0
vmovdqu8 zmmword ptr [rax]{k1}, zmm0
vmovdqu64 ymm0{k2}, ymmword ptr [rax]
vmovss xmm0{k1}, dword ptr [rax]
vaddps zmm0{k1}, zmm1, zmmword ptr [rax]
vaddps zmm0{k1}, zmm1, dword ptr [rax]{1to16}
vpermd zmm0{k1}, zmm1, zmmword ptr [rax]
vpcompressd zmmword ptr [rax]{k1}, zmm0
vpexpandd zmm0{k1}, zmmword ptr [rax]
vpmovdb xmmword ptr [rax]{k1}, zmm0
cmpxchg qword ptr [rax], rbx
lock cmpxchg dword ptr [rax], ebx
cmpxchg8b qword ptr [rax]
lock cmpxchg16b xmmword ptr [rax]
xadd qword ptr [rax], rbx
xchg qword ptr [rax], rbx
lock add dword ptr [rax], 1
lock inc qword ptr [rax]
xlat
addr32 xlat
movsb
mov rax, qword ptr [rbx]
syscall
iretq
retfq
call fword ptr [rax]
push fs
pop fs
movdir64b rax, [rbx]
clzero
cldemote [rax]
rep ret
mov byte ptr [eax+ebx], 1
mov rax, [rax]
add rbx, [rbx+rcx]
pop rsp
push rsp
pop qword ptr [rax]
mov eax, dword ptr [eip+0x100]
fnsave [rax]
fnstenv [rax]
vmovdqu8 zmm0{k1}, zmmword ptr [rax]
fs movsb
vbroadcastss ymm0, dword ptr [rax]
vpgatherdq zmm0{k1}, [rax+ymm1*8]
monitor
tileloadd tmm0, [rax+rbx*1]
