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

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("coldcache-capture-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn strided_sum_gives_the_exact_accesses() {
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
