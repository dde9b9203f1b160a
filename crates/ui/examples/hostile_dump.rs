//! Writes a dump whose every string a page shows carries HTML, for the
//! browser test that the UI shows them as text and runs none of it
//! (`scripts/ui-tests.sh`, `ui-tests/hostile.mjs`). The dump is the hand
//! dump of the analysis tests with hostile names, paths, source text,
//! thread name, program, cache name, capture notes and configuration.
//!
//!   cargo run -p coldcache-ui --example hostile_dump -- OUT.ccdump

#[path = "../../analysis/tests/common/hand_dump.rs"]
mod hand_dump;

/// Each payload, when parsed as HTML, bumps `window.__xss`.
const IMG: &str = r#"<img src=x onerror="window.__xss=(window.__xss||0)+1">"#;
const SCRIPT: &str = "<script>window.__xss=(window.__xss||0)+1</script>";
const ATTR: &str = r#""'><svg onload="window.__xss=(window.__xss||0)+1">"#;

fn main() {
    let Some(out) = std::env::args().nth(1) else {
        eprintln!("usage: hostile_dump OUT.ccdump");
        std::process::exit(2);
    };
    let mut d = hand_dump::dump(8);
    let s = d.symbols.as_mut().expect("the hand dump is resolved");
    // Functions: main, update, get_pos, render, rec.
    s.functions[1].name = format!("update{IMG}");
    s.functions[2].name = format!("get_pos{SCRIPT}");
    s.functions[3].name = format!("render{ATTR}");
    s.files[1] = format!("/s/{IMG}u.c");
    s.files[3] = format!("/s/{ATTR}pos.h");
    let u_c = s.files[1].clone();
    d.sources = vec![coldcache_dump::SourceText {
        path: u_c,
        text: (1..=25)
            .map(|i| format!("line {i} {IMG} {SCRIPT} {ATTR}\n"))
            .collect(),
    }];
    d.modules[0].path = format!("/bin/{IMG}prog");
    d.threads[1].name = format!("worker{SCRIPT}");
    d.meta.program = vec![format!("/bin/{IMG}prog"), ATTR.to_string()];
    d.meta.cache_name = format!("cache{IMG}");
    d.meta.cache_toml = format!("name = \"{SCRIPT}\"\n");
    d.meta.trigger = format!("function:{ATTR}");
    d.meta.notes = vec![format!("note {IMG}")];
    let tmp = format!("{out}.tmp");
    std::fs::write(&tmp, d.to_bytes())
        .and_then(|()| std::fs::rename(&tmp, &out))
        .unwrap_or_else(|e| {
            eprintln!("hostile_dump: cannot write {out}: {e}");
            std::process::exit(1);
        });
}
