# Instruction forms for the translator's differential test (src/jit/difftest.rs),
# on top of varied.s and the forms of tests/model.rs. Assembled by
# build-varied.sh difftest into difftest.txt (hex bytes | disassembly).
# Branch targets and RIP-relative operands are placed by the harness (it
# re-encodes them to reach its landing stubs and its buffer).
.intel_syntax noprefix
# ALU with memory operands
add rax, qword ptr [rbx]
add qword ptr [rbx+rcx*8+16], rax
sub dword ptr [rsi], 0x12345
adc byte ptr [rdi+1], al
sbb word ptr [rax+2], dx
and qword ptr [r12], r13
or r14d, dword ptr [r15+r8*4]
xor qword ptr [rbx], -1
cmp qword ptr [rax], rcx
test byte ptr [rbx], 0x80
inc dword ptr [rbp+8]
dec qword ptr [r9]
neg qword ptr [r10]
not word ptr [r11]
imul rax, qword ptr [rbx]
imul ecx, dword ptr [rdx], 7
mul qword ptr [rbx]
shl qword ptr [rax], 3
sar dword ptr [rax], cl
rol word ptr [rbx], 1
rcl qword ptr [rax], 1
rcr byte ptr [rbx], cl
shld qword ptr [rax], rbx, 5
shrd dword ptr [rax], ecx, cl
movzx eax, byte ptr [rbx]
movsx rax, word ptr [rbx+rcx*2]
movsxd rax, dword ptr [rbx]
mov ah, byte ptr [rbx]
mov byte ptr [rbx+1], ah
mov r8b, byte ptr [r13+r12*1+0x7f]
mov qword ptr [rax-0x80], 0x7fffffff
adcx rax, qword ptr [rbx]
adox rax, qword ptr [rbx]
andn rax, rbx, qword ptr [rcx]
shlx rax, qword ptr [rbx], rcx
popcnt rax, qword ptr [rbx]
lzcnt ecx, dword ptr [rax]
tzcnt rcx, qword ptr [rax]
crc32 eax, byte ptr [rbx]
movbe rax, qword ptr [rbx]
movbe qword ptr [rbx], rax
# push and pop
push qword ptr [rax]
push word ptr [rax]
push 0x12345
push -1
push r12
pop rbx
pop r15
pop qword ptr [rax+8]
pop qword ptr [rsp+16]
# calls, returns, jumps (targets placed by the harness)
call rax
call r11
call qword ptr [rbx+8]
call qword ptr [rip+0x100]
call .+0x40
jmp rax
jmp qword ptr [rbx]
jmp qword ptr [rip+0x100]
jmp .+0x40
jmp .+0x400
ret
ret 8
jz .+0x40
jnz .+0x40
jb .+0x400
jle .+0x400
jp .+0x40
jo .+0x40
js .+0x40
ja .+0x40
# cmov and setcc
cmovz rax, qword ptr [rbx]
cmovnz eax, dword ptr [rbx]
cmovb rcx, rdx
cmovge r9, qword ptr [rax+r10*2]
setc byte ptr [rax]
setg byte ptr [rbx+1]
setnz al
setbe cl
# xchg, cmpxchg, lock forms
xchg qword ptr [rax], rbx
xchg byte ptr [rbx], cl
xchg rax, rdx
lock xadd dword ptr [rax], ecx
xadd word ptr [rbx], dx
lock cmpxchg qword ptr [rbx], rcx
cmpxchg byte ptr [rbx], dl
lock cmpxchg8b qword ptr [rax]
cmpxchg16b xmmword ptr [rax]
lock or qword ptr [rax], rbx
lock dec dword ptr [rbx]
lock not qword ptr [rax]
lock bts dword ptr [rax], 3
lock btr qword ptr [rax], rcx
# bt* with memory
bt qword ptr [rax], rcx
bts dword ptr [rbx+4], edx
btr qword ptr [rax], 63
btc word ptr [rax], cx
bt word ptr [rbx], 9
# string instructions of every width, without rep
movsb
movsw
movsd
movsq
stosb
stosw
stosd
stosq
lodsb
lodsw
lodsq
cmpsb
cmpsq
scasb
scasd
# RIP-relative (the harness points them into its buffer)
mov rax, qword ptr [rip+0x200]
movss xmm0, dword ptr [rip+0x200]
add dword ptr [rip+0x200], 1
movdqu xmmword ptr [rip+0x200], xmm3
cmp byte ptr [rip+0x200], 0x11
lea rax, [rip+0x200]
# stack-relative
mov rax, qword ptr [rsp+8]
mov qword ptr [rsp-8], rbx
add qword ptr [rsp], 1
lea rax, [rsp+16]
mov eax, dword ptr [rsp+rcx*4]
movaps xmmword ptr [rsp-32], xmm1
add rsp, 16
sub rsp, 0x28
lea rsp, [rsp-8]
and rsp, -16
mov rsp, rbp
# SSE and AVX loads and stores
movups xmm1, xmmword ptr [rax]
movups xmmword ptr [rax+16], xmm2
movaps xmm3, xmmword ptr [rbx]
movdqa xmmword ptr [rbx], xmm4
movdqu xmm5, xmmword ptr [rbx+rcx]
movq xmm6, qword ptr [rax]
movq qword ptr [rax], xmm7
movd xmm8, dword ptr [rax]
movss dword ptr [rax], xmm9
movsd xmm10, qword ptr [rax]
movlps qword ptr [rax], xmm11
movhps xmm12, qword ptr [rax]
addps xmm13, xmmword ptr [rax]
pxor xmm14, xmmword ptr [rax]
pshufb xmm15, xmmword ptr [rax]
pinsrd xmm0, dword ptr [rax], 2
pextrb byte ptr [rax], xmm1, 3
movntdq xmmword ptr [rax], xmm2
movnti dword ptr [rax], ecx
vmovups ymm0, ymmword ptr [rax]
vmovups ymmword ptr [rax], ymm1
vmovdqa ymm2, ymmword ptr [rbx]
vmovdqu ymmword ptr [rbx+rcx], ymm3
vaddpd ymm4, ymm5, ymmword ptr [rax]
vpaddd xmm6, xmm7, xmmword ptr [rax]
vbroadcastsd ymm8, qword ptr [rax]
vpbroadcastb ymm0, byte ptr [rax]
vinserti128 ymm9, ymm10, xmmword ptr [rax], 1
vextractf128 xmmword ptr [rax], ymm11, 1
vpermq ymm12, ymmword ptr [rax], 0x1b
vfmadd231ps ymm13, ymm14, ymmword ptr [rax]
vmovd xmm15, dword ptr [rbx]
vmovntdq ymmword ptr [rax], ymm1
vzeroupper
vpxor ymm3, ymm4, ymm5
# reading flags
adc rax, rbx
sbb ecx, edx
pushfq
lahf
sahf
cmc
cmovle rax, rbx
# x87 and MXCSR/FPU state stores
fld qword ptr [rax]
fstp qword ptr [rax+8]
fild dword ptr [rbx]
fnstcw word ptr [rax]
fnstsw word ptr [rbx]
stmxcsr dword ptr [rax]
# segment selectors: stores run, loads of FS/GS are refused
mov eax, fs
mov word ptr [rax], gs
push gs
mov fs, eax
mov gs, ax
pop gs
lfs eax, fword ptr [rbx]
lgs eax, fword ptr [rbx]
# stack-based indirect branches, RSP exchanged, FS-relative memory
call qword ptr [rsp+8]
call qword ptr [rsp]
jmp qword ptr [rsp+16]
ret 0x100
bnd ret
notrack jmp rax
ds jz .+0x40
xchg rsp, rbx
mov qword ptr fs:[rbx+8], rcx
add dword ptr fs:[rax], ecx
mov rax, qword ptr fs:[rsi+rdi*8]
# near branches with an operand-size prefix (Intel ignores it, AMD
# truncates RIP to 16 bits): refused
.byte 0x66, 0xc3
.byte 0x66, 0xc2, 0x08, 0x00
.byte 0x66, 0xeb, 0x10
.byte 0x66, 0x74, 0x10
.byte 0x66, 0x48, 0x74, 0x10
.byte 0x66, 0xff, 0xd0
.byte 0x66, 0xff, 0xe0
# implicit registers
cmpxchg rbx, rcx
blendvps xmm1, xmmword ptr [rax], xmm0
pblendvb xmm2, xmmword ptr [rbx]
pcmpestri xmm1, xmmword ptr [rax], 0x0c
pcmpistrm xmm3, xmmword ptr [rbx], 0x40
mulx rax, rbx, qword ptr [rcx]
ldmxcsr dword ptr [rax]
vzeroall
rdfsbase rax
endbr64
addr32 lodsb
addr32 stosd
addr32 movsq
# miscellaneous
xlatb
cqo
cdqe
bswap rax
enter 8, 0
enter 16, 2
leave
nop
pause
# refused by the translator
rep movsb
rep stosq
repne scasb
syscall
int3
int 0x80
loop .+0x40
jrcxz .+0x40
xbegin .+0x40
xend
xabort 1
wrfsbase rax
wrgsbase rbx
retf
ud2
hlt
vpgatherdd ymm0, dword ptr [rax+ymm1*4], ymm2
vmaskmovps ymm0, ymm1, ymmword ptr [rax]
maskmovdqu xmm1, xmm2
xsave [rax]
xrstor [rax]
