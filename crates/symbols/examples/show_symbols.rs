//! Prints the embedded symbol tables of a dump, one address per line with
//! its frames (innermost first) and instruction bytes:
//! `cargo run -p coldcache-symbols --example show_symbols -- DUMP`.

use coldcache_dump::Dump;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: show_symbols DUMP");
        std::process::exit(2);
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let d = Dump::from_bytes(&bytes).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let Some(s) = &d.symbols else {
        println!("{path}: not resolved");
        return;
    };
    for (m, ms) in d.modules.iter().zip(&s.modules) {
        println!("module {} {:?} {}", m.path, ms.status, ms.detail);
    }
    for l in &s.locations {
        let code: String = l.code.iter().map(|b| format!("{b:02x}")).collect();
        print!("{:#x} [{code}]", l.addr);
        for f in &l.frames {
            let func = &s.functions[f.function as usize];
            print!(
                " | {} (entry {:#x}) {}:{}",
                func.name,
                func.entry,
                s.file(f.file).unwrap_or("??"),
                f.line
            );
        }
        println!();
    }
}
