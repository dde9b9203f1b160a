//! Resolver tests without a capture: synthetic dumps over real files.
//!
//! - 100,000 distinct addresses in this test executable (a Rust binary with
//!   line tables) resolve, Rust names demangled, and the time is printed
//!   (`cargo test --release -p coldcache-symbols -- --nocapture`); no
//!   timing is asserted.
//! - Modules that are not files, not ELF, missing, or outside every module
//!   get empty frames and a status naming the problem.
//!
//! Comparisons with binutils on captured programs are in
//! `crates/cli/tests/resolve.rs`.

use coldcache_dump::{Dump, Module, ModuleStatus, Record, StackNode, Thread};
use coldcache_symbols::{resolve, summarize, ResolveOptions};
use object::{Object, ObjectSection};

fn dump(modules: Vec<Module>, ips: &[u64]) -> Dump {
    Dump {
        modules,
        threads: vec![Thread::default()],
        stacks: vec![StackNode::default()],
        records: ips
            .iter()
            .map(|&ip| Record {
                ip,
                stack: 0,
                thread: 0,
                counters: Vec::new(),
            })
            .collect(),
        ..Dump::default()
    }
}

#[test]
fn hundred_thousand_addresses_of_a_rust_binary() {
    let exe = std::env::current_exe().unwrap();
    let data = std::fs::read(&exe).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let text = obj.section_by_name(".text").unwrap();
    let (text_off, text_size) = text.file_range().unwrap();
    let base = 0x5555_0000_0000u64;
    let module = Module {
        path: exe.display().to_string(),
        build_id: obj.build_id().unwrap().unwrap_or_default().to_vec(),
        start: base,
        end: base + data.len() as u64,
        file_offset: 0,
    };
    let n = 100_000u64;
    let step = (text_size / n).max(1);
    let ips: Vec<u64> = (0..n)
        .map(|i| base + text_off + (i * step) % text_size)
        .collect();
    let mut d = dump(vec![module], &ips);
    let distinct = d.addresses().len();
    let t = std::time::Instant::now();
    let s = resolve(&d, &ResolveOptions::default());
    let took = t.elapsed();
    eprintln!(
        "resolved {distinct} distinct addresses of {} ({} KiB of .text) in {:.3} s: {} functions, {} files",
        exe.display(),
        text_size / 1024,
        took.as_secs_f64(),
        s.functions.len(),
        s.files.len()
    );
    assert_eq!(s.locations.len(), distinct);
    assert_eq!(
        s.modules[0].status,
        ModuleStatus::Lines,
        "{:?}",
        s.modules[0]
    );
    let named = s.locations.iter().filter(|l| !l.frames.is_empty()).count();
    assert!(
        named * 10 >= distinct * 9,
        "only {named} of {distinct} addresses named"
    );
    for f in &s.functions {
        assert!(
            !f.name.starts_with("_ZN") && !f.name.starts_with("_R"),
            "{} is not demangled",
            f.name
        );
    }
    assert!(
        s.functions
            .iter()
            .any(|f| f.name.contains("coldcache_symbols::") && f.entry != 0),
        "the resolver's own functions are named"
    );
    for l in &s.locations {
        assert!(l.code.len() <= 15);
        if let Some(last) = l.frames.last() {
            let f = &s.functions[last.function as usize];
            assert!(f.entry == 0 || f.entry <= l.addr, "entry after the address");
        }
    }
    d.symbols = Some(s);
    let back = Dump::from_bytes(&d.to_bytes()).unwrap();
    assert_eq!(back.symbols, d.symbols);
    let (mods, outside) = summarize(&back);
    assert_eq!(outside, 0);
    assert_eq!(mods.len(), 1);
    assert_eq!(
        mods[0].lines + mods[0].names_only + mods[0].nothing,
        distinct
    );
}

#[test]
fn unreadable_modules_are_reported_with_what_is_wrong() {
    let dir = std::env::temp_dir().join(format!("coldcache-symbols-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not an ELF file").unwrap();
    let m = |path: &str, start: u64| Module {
        path: path.into(),
        build_id: Vec::new(),
        start,
        end: start + 0x1000,
        file_offset: 0,
    };
    let d = dump(
        vec![
            m("[vdso]", 0x1000),
            m(text.to_str().unwrap(), 0x3000),
            m("/nonexistent/prog", 0x5000),
            m("/nonexistent/unused", 0x7000),
        ],
        &[0x1010, 0x3010, 0x5010, 0x9000],
    );
    let s = resolve(&d, &ResolveOptions::default());
    assert_eq!(s.locations.len(), 4);
    assert!(s
        .locations
        .iter()
        .all(|l| l.frames.is_empty() && l.code.is_empty()));
    let st: Vec<_> = s.modules.iter().map(|m| m.status).collect();
    assert_eq!(
        st,
        [
            ModuleStatus::NotFound,
            ModuleStatus::NotFound,
            ModuleStatus::NotFound,
            ModuleStatus::Unresolved
        ]
    );
    assert_eq!(s.modules[0].detail, "[vdso] is not a file");
    assert!(s.modules[1].detail.contains("is not a readable ELF file"));
    assert!(s.modules[1].detail.contains("notes.txt"));
    assert!(
        s.modules[2]
            .detail
            .starts_with("cannot read /nonexistent/prog: "),
        "{}",
        s.modules[2].detail
    );
    let mut d = d;
    d.symbols = Some(s);
    let (mods, outside) = summarize(&d);
    assert_eq!(outside, 1, "0x9000 is outside every module");
    assert_eq!(mods.len(), 3);
    assert!(mods.iter().all(|m| m.nothing == 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demangles_rust_and_cpp_like_their_tools() {
    use coldcache_symbols::demangle;
    assert_eq!(demangle("_ZN3foo3barE"), "foo::bar");
    assert_eq!(
        demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
        "core::ptr::drop_in_place"
    );
    assert_eq!(demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
    // cpp_demangle cannot parse this one (an `sr` template expression);
    // libstdc++'s __cxa_demangle, as c++filt, can.
    assert_eq!(
        demangle("_ZSt14__relocate_a_1IN3geo4Vec2ES1_ENSt9enable_ifIXsrSt24__is_bitwise_relocatableIT_vE5valueEPS4_E4typeES6_S6_S6_RSaIT0_E"),
        "std::enable_if<std::__is_bitwise_relocatable<geo::Vec2, void>::value, geo::Vec2*>::type std::__relocate_a_1<geo::Vec2, geo::Vec2>(geo::Vec2*, geo::Vec2*, geo::Vec2*, std::allocator<geo::Vec2>&)"
    );
    assert_eq!(demangle("memset"), "memset");
    assert_eq!(demangle("_Zbroken"), "_Zbroken");
}
