//! Prints a dump's metadata and its records as text (a debugging aid until
//! `coldcache report` exists): `cargo run --example dump_records -- FILE [COUNTER]`
//! prints only records whose COUNTER is non-zero when a counter is named.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: dump_records FILE [COUNTER]");
        std::process::exit(2);
    };
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let d = coldcache_dump::Dump::from_bytes(&bytes).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    println!("{:#?}", d.meta);
    for m in &d.modules {
        println!(
            "module {:#x}-{:#x} off {:#x} {}",
            m.start, m.end, m.file_offset, m.path
        );
    }
    let filter = args.get(2).and_then(|c| d.counter(c));
    for r in &d.records {
        if filter.is_some_and(|i| r.counters[i] == 0) {
            continue;
        }
        let frames: Vec<String> = d
            .stack_frames(r.stack)
            .iter()
            .map(|f| format!("{:#x}", f.call_site))
            .collect();
        println!(
            "{:#x} t{} [{}] {:?}",
            r.ip,
            r.thread,
            frames.join(" > "),
            r.counters
        );
    }
}
