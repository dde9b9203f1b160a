//! Captures of kernels whose accesses are known by construction: each
//! kernel is written in assembly, so the instructions it executes and the
//! addresses it touches can be computed by hand and compared with the dump
//! and the trace the capture writes.

use coldcache_capture::{start, Options};
use coldcache_dump::Dump;
use coldcache_trace::RecordKind;

core::arch::global_asm!(
    ".globl cc_test_strided_sum",
    "cc_test_strided_sum:", // rdi = base, rsi = count, rdx = stride (bytes)
    "xor eax, eax",
    "2:",
    "add rax, [rdi]",
    "add rdi, rdx",
    "dec rsi",
    "jnz 2b",
    "ret",
    ".globl cc_test_strided_sum_end",
    "cc_test_strided_sum_end:",
);

extern "C" {
    fn cc_test_strided_sum(base: *const u64, count: u64, stride: u64) -> u64;
    fn cc_test_strided_sum_end();
}

/// One capture at a time in a process: the tests take turns.
static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("coldcache-capture-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn strided_sum_gives_the_exact_accesses() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let n = 100u64;
    let stride = 64u64;
    let data = vec![1u64; (n * stride / 8) as usize + 8];
    let dump_path = tmp("strided.ccdump");
    let trace_path = tmp("strided.cctrace");
    let mut opts = Options::new(coldcache_sim::presets::cachegrind_default(), &dump_path);
    opts.trace = Some(trace_path.clone());
    let f = cc_test_strided_sum as *const () as u64;
    let end = cc_test_strided_sum_end as *const () as u64;
    let cap = start(opts).unwrap();
    // SAFETY: the kernel reads `n` words spaced by `stride` bytes inside `data`.
    let sum = unsafe { cc_test_strided_sum(data.as_ptr(), n, stride) };
    let summary = cap.stop().unwrap();
    assert_eq!(sum, n);
    assert_eq!(summary.cut_short, None);

    let dump = Dump::from_bytes(&std::fs::read(&dump_path).unwrap()).unwrap();
    let instr = dump.counter("instructions").unwrap();
    let in_kernel = |ip: u64| ip >= f && ip < end;
    let kernel_instructions: u64 = dump
        .records
        .iter()
        .filter(|r| in_kernel(r.ip))
        .map(|r| r.counters[instr])
        .sum();
    // xor + n * (add, add, dec, jnz) + ret
    assert_eq!(kernel_instructions, 2 + 4 * n);

    // The trace: within the kernel, exactly the n loads at base + k*stride
    // and the ret's load of the return address, in order.
    let mut reader = coldcache_trace::open(&trace_path, None).unwrap();
    let mut recs = Vec::new();
    let mut batch = Vec::new();
    while reader.read_batch(&mut batch, 1 << 16).unwrap() > 0 {
        recs.append(&mut batch);
    }
    {
        let loads: Vec<_> = recs
            .iter()
            .filter(|r| in_kernel(r.ip) && !r.kind.is_instr())
            .collect();
        let base = data.as_ptr() as u64;
        assert_eq!(loads.len() as u64, n + 1);
        for (k, r) in loads[..n as usize].iter().enumerate() {
            assert_eq!(
                (r.kind, r.addr, r.size),
                (RecordKind::Load, base + k as u64 * stride, 8)
            );
        }
        assert_eq!(loads[n as usize].size, 8, "ret reads the return address");
    }
}

/// The engine's trap handler runs on the program's own alternate stack
/// when the thread has one (`altstack.rs`): Rust's runtime arms
/// `max(SIGSTKSZ, AT_MINSIGSTKSZ)` bytes on every thread, 8 KiB where the
/// kernel's frame (about `AT_MINSIGSTKSZ`: 3,376 bytes with AVX-512 state)
/// leaves under 5 KiB. The handler's first frames must fit in 4 KiB
/// beyond the kernel's minimum; the rest runs on the engine's own stack.
/// A 4 KiB frame made on every trap (the `--mode verify` check's, whether
/// verifying or not) overflowed it: this test binary died of SIGSEGV on
/// an AVX-512 machine.
#[test]
fn the_trap_handler_fits_an_alternate_stack_of_4_kib_beyond_the_kernels_minimum() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::spawn(|| {
        // SAFETY: getauxval has no preconditions.
        let min = unsafe { libc::getauxval(libc::AT_MINSIGSTKSZ) } as usize;
        let size = min.max(libc::MINSIGSTKSZ) + 4096;
        // A guard page below the stack: an overflow faults at once rather
        // than writing over the heap.
        // SAFETY: an anonymous private mapping has no preconditions.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size + 4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the first page of the mapping just made.
        assert_eq!(unsafe { libc::mprotect(p, 4096, libc::PROT_NONE) }, 0);
        let ss = libc::stack_t {
            // SAFETY: inside the mapping.
            ss_sp: unsafe { (p as *mut u8).add(4096) } as *mut libc::c_void,
            ss_flags: 0,
            ss_size: size,
        };
        // SAFETY: a valid stack_t; the old one is not asked for.
        assert_eq!(unsafe { libc::sigaltstack(&ss, std::ptr::null_mut()) }, 0);
        let data = vec![1u64; 64 * 8];
        let dump_path = tmp("small-altstack.ccdump");
        let opts = Options::new(coldcache_sim::presets::cachegrind_default(), &dump_path);
        let cap = start(opts).unwrap();
        // SAFETY: the kernel reads 64 words 64 bytes apart inside `data`.
        let sum = unsafe { cc_test_strided_sum(data.as_ptr(), 64, 64) };
        let summary = cap.stop().unwrap();
        assert_eq!(sum, 64);
        assert_eq!(summary.cut_short, None);
        let ss = libc::stack_t {
            ss_sp: std::ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: disabling the alternate stack before unmapping it.
        unsafe {
            libc::sigaltstack(&ss, std::ptr::null_mut());
            libc::munmap(p, size + 4096);
        }
    })
    .join()
    .unwrap();
}
