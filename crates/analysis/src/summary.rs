//! The summary of a capture a person reads first: what ran (the program),
//! on which simulated cache, over which window (what started and stopped
//! it, whether it was cut short, which capture mode ran), and the totals —
//! instructions, and misses per cache level.
//!
//! The web UI shows it at the top of its default page (`/api/meta` carries
//! it per dump). Counts are the profile's totals (the `TOTAL` row of
//! `coldcache report`), misses per level the same derived columns every view
//! shows (`i_miss_<L>`, `d_miss_<L>`, `mem`, [`crate::columns`]).
//!
//! What the capture could not treat as the rest is said in words whenever
//! it is not zero ([`Shortfall`]): instructions whose accesses could not be
//! modelled, by class ([`unmodelled`]), and instructions a fast-mode
//! capture ran under the trap engine ([`trapped`], read from the engine's
//! note by [`fast_trapped`] alone). `coldcache report`'s header, `record`'s
//! summary and the web UI's summary card use these same sentences. A dump
//! resolved with data types also says how many of its data accesses got a
//! type and a field ([`Summary::data_types`]).

use crate::columns::{Column, D_MISS, I_MISS, MEM};
use crate::profile::Profile;
use coldcache_dump::thousands;
use coldcache_dump::{CounterLayout, Meta};
use serde::Serialize;

/// The summary of one dump.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// The program and its arguments, as captured.
    pub program: Vec<String>,
    /// The cache configuration's name (a preset or a file).
    pub cache_name: String,
    /// The simulated levels, nearest first.
    pub levels: Vec<String>,
    /// Simulated cores.
    pub cores: u32,
    /// The capture window.
    pub window: Window,
    /// Instructions (the total of the `instructions` column).
    pub instructions: u64,
    /// Misses per level, nearest first; empty for a dump of another
    /// counter layout.
    pub misses: Vec<LevelMisses>,
    /// Accesses served by memory (`mem`), when the dump has the column.
    pub memory: Option<u64>,
    /// Instructions whose accesses the model could not compute, in words
    /// ([`unmodelled`]); `None` when there are none.
    pub unmodelled: Option<Shortfall>,
    /// Instructions of a fast-mode capture that ran under the trap engine,
    /// in words ([`trapped`]); `None` when there are none.
    pub trapped: Option<Shortfall>,
    /// Threads of the process the capture's `--threads` left untraced, in
    /// words ([`untraced`]); `None` when there are none.
    pub untraced: Option<Shortfall>,
    /// Valgrind client requests the program made, in words
    /// ([`client_requests`]); `None` when none.
    pub client_requests: Option<Shortfall>,
    /// The program's waits the capture's signals ended early, in words
    /// ([`woken_early`]); `None` when none.
    pub woken_early: Option<Shortfall>,
    /// How many data accesses got a type and a field
    /// ([`crate::data::coverage`]); `None` for a dump without data types.
    pub data_types: Option<crate::data::Coverage>,
}

/// Instructions (or threads) a capture could not treat as the rest, in
/// words: what `record`'s summary, `report`'s header and the web UI's
/// summary card say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Shortfall {
    /// How many instructions (threads, for [`untraced`]).
    pub count: u64,
    /// The count and its classes: `405,854 instructions unmodelled:
    /// 405,854 partially masked AVX-512 memory operand`.
    pub text: String,
    /// What it means for the counts, and what to do about it.
    pub advice: String,
}

/// The instructions of a fast-mode capture that ran under the trap engine
/// (`meta.mode`; in a dump written before that field, the engine's note
/// `capture mode fast: N instructions ran under the trap engine …`, the
/// one place that still reads it). `None` for a capture not made in fast
/// mode.
pub fn fast_trapped(meta: &Meta) -> Option<u64> {
    if !meta.mode.is_unknown() {
        return (meta.mode.engine == "fast").then_some(meta.mode.trapped);
    }
    old_note(meta, "capture mode fast: ").and_then(|n| n.split(' ').next()?.parse().ok())
}

/// A note of a dump written before `meta.mode` existed, by its prefix.
fn old_note<'a>(meta: &'a Meta, prefix: &str) -> Option<&'a str> {
    meta.notes.iter().find_map(|n| n.strip_prefix(prefix))
}

/// Why fast mode could not run, for a trap capture `--mode auto` chose
/// (`meta.mode.fallback`, or the note of an older dump).
pub fn trap_fallback(meta: &Meta) -> Option<&str> {
    if !meta.mode.is_unknown() {
        return (!meta.mode.fallback.is_empty()).then_some(meta.mode.fallback.as_str());
    }
    old_note(meta, "capture mode trap: ")
}

/// The unmodelled instructions in words, by class (`meta.unmodelled`, the
/// engine's reasons), with what they mean; `None` when there are none.
/// `total` is the dump's `unmodelled` counter total (for a dump whose
/// classes were not recorded, a re-simulated trace); the classes' sum is
/// used when larger.
pub fn unmodelled(meta: &Meta, total: u64) -> Option<Shortfall> {
    let by_class: u64 = meta.unmodelled.iter().map(|(_, n)| n).sum();
    let count = by_class.max(total);
    if count == 0 {
        return None;
    }
    let mut classes: Vec<String> = meta
        .unmodelled
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(why, n)| format!("{} {why}", thousands(*n)))
        .collect();
    if by_class < count {
        classes.push(format!(
            "{} of no recorded class",
            thousands(count - by_class)
        ));
    }
    let mut advice = "their memory accesses are not in the counts (the instructions are): \
                      misses may be undercounted"
        .to_string();
    if meta
        .unmodelled
        .iter()
        .any(|(why, _)| why.contains("AVX-512"))
    {
        advice.push_str(
            "; masked AVX-512 code usually comes from glibc's string functions: \
             GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ \
             makes glibc pick others (as under Valgrind)",
        );
    }
    Some(Shortfall {
        count,
        text: format!(
            "{} instruction{} unmodelled: {}",
            thousands(count),
            if count == 1 { "" } else { "s" },
            classes.join(", ")
        ),
        advice,
    })
}

/// The threads the capture's selection left untraced (`meta.untraced`),
/// in words, with what to do; `None` when there are none.
pub fn untraced(meta: &Meta) -> Option<Shortfall> {
    let u = meta.untraced;
    if u.is_none() {
        return None;
    }
    let count = u.present + u.started;
    let threads = |n: u64| format!("{} thread{}", thousands(n), if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    if u.started > 0 {
        parts.push(format!(
            "{} started during the window",
            thousands(u.started)
        ));
    }
    if u.present > 0 {
        parts.push(format!("{} alive when it began", thousands(u.present)));
    }
    Some(Shortfall {
        count,
        text: format!("{} not traced: {}", threads(count), parts.join(", ")),
        advice: format!(
            "their instructions and accesses are not in the counts (threads traced: {}); \
             --threads all traces every thread",
            meta.threads
        ),
    })
}

/// The program's waits the capture's signals ended early with EINTR
/// (`meta.woken_early`), in words, with what it means; `None` when none.
pub fn woken_early(meta: &Meta) -> Option<Shortfall> {
    let w = meta.woken_early;
    if w.is_none() {
        return None;
    }
    let count = w.by_start + w.by_trigger;
    let mut parts = Vec::new();
    if w.by_start > 0 {
        parts.push(format!(
            "{} by the signal that starts a thread's tracing",
            thousands(w.by_start)
        ));
    }
    if w.by_trigger > 0 {
        parts.push(format!(
            "{} by the trigger signal (--signal; attach without a trigger starts and stops with it)",
            thousands(w.by_trigger)
        ));
    }
    Some(Shortfall {
        count,
        text: format!(
            "{} wait{} of the program ended early with EINTR: {}",
            thousands(count),
            if count == 1 { "" } else { "s" },
            parts.join(", ")
        ),
        advice: "calls the kernel never restarts after a signal handler (nanosleep, poll, \
                 epoll_wait, ...), as any signal ends them; a program that does not retry them \
                 behaves differently. --function starts the capture without the trigger signal"
            .to_string(),
    })
}

/// The Valgrind client requests the program made (`meta.client_requests`),
/// in words: how many of each, whether they took effect, and what to do
/// when they did not; `None` when none was made.
pub fn client_requests(meta: &Meta) -> Option<Shortfall> {
    let c = &meta.client_requests;
    let count: u64 = c.made.iter().map(|(_, n)| n).sum();
    if count == 0 {
        return None;
    }
    let kinds: Vec<String> = c
        .made
        .iter()
        .map(|(what, n)| format!("{} {what}", thousands(*n)))
        .collect();
    let mut advice = if c.honoured {
        "honoured: instructions counted only while collection and instrumentation were on"
            .to_string()
    } else {
        "not honoured, only counted: `record --client-requests` (or `coldcache valgrind`) \
         honours them"
            .to_string()
    };
    if let Some(p) = &meta.part {
        advice.push_str(&format!(
            "; DUMP_STATS cut the profile into {} parts, each a dump of its own: this is part \
             {}, ended by {} (the others are the numbered dumps beside it)",
            p.of, p.number, p.trigger
        ));
    }
    Some(Shortfall {
        count,
        text: format!(
            "{} client request{}: {}",
            thousands(count),
            if count == 1 { "" } else { "s" },
            kinds.join(", ")
        ),
        advice,
    })
}

/// The instructions a fast-mode capture ran under the trap engine, in
/// words ([`fast_trapped`]), with what they mean; `None` when there are
/// none or the capture was not made in fast mode.
pub fn trapped(meta: &Meta) -> Option<Shortfall> {
    let count = fast_trapped(meta).filter(|&n| n > 0)?;
    let share = if meta.instructions > 0 {
        format!(" ({:.2}%)", count as f64 * 100.0 / meta.instructions as f64)
    } else {
        String::new()
    };
    // The causes, where the engine counted them (`meta.mode.trapped_by`;
    // an older dump's note `fast mode trapped by cause: N why; N why`).
    let causes: Vec<(u64, &str)> = if meta.mode.is_unknown() {
        old_note(meta, "fast mode trapped by cause: ")
            .map(|c| {
                c.split("; ")
                    .filter_map(|e| {
                        let (n, why) = e.split_once(' ')?;
                        Some((n.parse().ok()?, why))
                    })
                    .collect()
            })
            .unwrap_or_default()
    } else {
        meta.mode
            .trapped_by
            .iter()
            .map(|(n, why)| (*n, why.as_str()))
            .collect()
    };
    let by_cause = if causes.is_empty() {
        String::new()
    } else {
        let list: Vec<String> = causes
            .iter()
            .map(|(n, why)| format!("{} {why}", thousands(*n)))
            .collect();
        format!(": {}", list.join("; "))
    };
    let mut advice =
        "counted as the others, but each costs a trap (tens of microseconds)".to_string();
    if causes.is_empty() {
        advice.push_str(
            ": blocks the translator refuses, the first instruction of each thread, the \
             instruction after each system call",
        );
    }
    if causes.iter().any(|(_, why)| why.contains("JIT")) {
        advice.push_str(
            "; code a JIT writes (V8's, LuaJIT's, a regex engine's) is not translated, so it \
             runs at trap speed: its counts are exact; keep the window on the code around it \
             when speed matters",
        );
    }
    Some(Shortfall {
        count,
        text: format!(
            "{} of {} instructions{share} ran under the trap engine{by_cause}",
            thousands(count),
            thousands(meta.instructions)
        ),
        advice,
    })
}

/// How the capture started and stopped.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    /// The dump's trigger, as recorded (`function:NAME`, `signal`, `api`).
    pub trigger: String,
    /// What started the capture, in words.
    pub started: String,
    /// What stopped it, in words (the reason it was cut short, if it was).
    pub stopped: String,
    /// Why the capture stopped early, when it did.
    pub cut_short: Option<String>,
    /// The capture mode that ran ([`capture_mode`]).
    pub mode: String,
    /// Which threads were traced (`caller`, `all`, ...).
    pub threads: String,
    /// Wall time of the window, in nanoseconds.
    pub duration_ns: u64,
}

/// The misses of one cache level.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelMisses {
    /// The level's name (`L1`).
    pub level: String,
    /// Instruction fetches that missed it (`i_miss_<L>`).
    pub instruction: u64,
    /// Data accesses that missed it (`d_miss_<L>`).
    pub data: u64,
}

/// The capture mode a dump was made in (`meta.mode`, or an older dump's
/// note `capture mode fast: …`, `capture mode trap: …`): `fast`,
/// `trap (why fast mode could not run)`, with `, verified` when fast mode
/// was checked against the trap engine; `trap` without either (trap mode
/// asked for in an older dump, or a dump made before fast mode existed).
pub fn capture_mode(meta: &Meta) -> String {
    // A dump re-simulated from a trace that no capture wrote (lackey, din,
    // a converted cctrace): no engine ran.
    if meta.trigger == "trace" {
        return "none (simulated from a recorded trace)".to_string();
    }
    let mut mode = if fast_trapped(meta).is_some() {
        "fast".to_string()
    } else if let Some(why) = trap_fallback(meta) {
        format!("trap ({why})")
    } else {
        "trap".to_string()
    };
    if old_note(meta, "fast-mode verification: ").is_some() {
        mode.push_str(", verified against the trap engine");
    }
    mode
}

/// The name a person reads for the symbol of a `function:` trigger (the
/// trigger keeps the symbol as found, `_ZN4game5frameEPNS_6EntityEi`): the
/// demangled name of the function the capture's stacks start in, when the
/// dump is resolved and that function is the symbol's (its last name part
/// appears in the symbol as the mangling writes it: `5frame`, or the
/// symbol is the name); else the symbol.
fn function_name(p: &Profile, symbol: &str) -> String {
    let d = p.dump();
    let Some(syms) = d.symbols.as_ref() else {
        return symbol.to_string();
    };
    let is_it = |name: &str| {
        let base = name.split('(').next().unwrap_or(name);
        let last = base.rsplit("::").next().unwrap_or(base);
        name == symbol || (!last.is_empty() && symbol.contains(&format!("{}{last}", last.len())))
    };
    // The functions the window's stacks enter (the callees of their call
    // sites: the stacks reach down from `_start` in a `--function`
    // capture), and those of its first instructions.
    let outermost = |addr: u64| -> Option<&str> {
        let f = syms.location(addr)?.frames.last()?;
        syms.functions
            .get(f.function as usize)
            .map(|f| f.name.as_str())
    };
    d.stacks
        .iter()
        .map(|n| n.callee)
        .filter(|&c| c != 0)
        .chain(d.records.iter().map(|r| r.ip).take(64))
        .filter_map(outermost)
        .find(|name| is_it(name))
        .map_or_else(|| symbol.to_string(), str::to_string)
}

/// What started and what stopped a capture with this trigger, in words
/// (`function`: the name to say for a `function:` trigger's symbol).
fn start_and_stop(meta: &Meta, function: Option<&str>) -> (String, String) {
    let (started, stopped) = match meta.trigger.split_once(':') {
        Some(("function", symbol)) => {
            let name = function.unwrap_or(symbol);
            let range = meta.calls.split_once(" to ");
            // The first call (the default) needs no saying.
            let first = match range {
                Some((first, _)) => Some(first),
                None if !meta.calls.is_empty() && meta.calls != "1" => Some(meta.calls.as_str()),
                None => None,
            };
            let started = match first {
                Some(f) => format!("entry to {name} (call {f})"),
                None => format!("entry to {name}"),
            };
            // A call the program's exit ended (`meta.exit_ended`) instead
            // of its return; its number said when the window had several.
            const EXITED: &str = "(exit() in the call: captured up to the exit)";
            let stopped = match (meta.exit_ended, range) {
                (0, Some((_, last))) => format!("{name} returned (call {last})"),
                (0, None) => format!("{name} returned"),
                (n, Some(_)) => format!("the program exited in {name} (call {n}) {EXITED}"),
                (_, None) => format!("the program exited in {name} {EXITED}"),
            };
            (started, stopped)
        }
        _ => match meta.trigger.as_str() {
            "signal" => (
                "a signal (`coldcache trigger`)".to_string(),
                "the next signal".to_string(),
            ),
            "api" => (
                "the program (C API start)".to_string(),
                "the program (C API stop)".to_string(),
            ),
            "trace" => (
                "the trace's first record".to_string(),
                "its last record".to_string(),
            ),
            t => (t.to_string(), "the end of the window".to_string()),
        },
    };
    match &meta.cut_short {
        Some(why) => (started, format!("cut short: {why}")),
        None => (started, stopped),
    }
}

/// The summary of `p`.
pub fn summary(p: &Profile) -> Summary {
    let m = &p.dump().meta;
    let totals = p.totals();
    let column = |name: &str| -> Option<&Column> { p.columns().iter().find(|c| c.name == name) };
    let total = |name: &str| column(name).map(|c| c.int_value(totals));
    let misses = m
        .levels
        .iter()
        .filter_map(|l| {
            Some(LevelMisses {
                level: l.clone(),
                instruction: total(&format!("{I_MISS}{l}"))?,
                data: total(&format!("{D_MISS}{l}"))?,
            })
        })
        .collect();
    let function = m
        .trigger
        .strip_prefix("function:")
        .map(|sym| function_name(p, sym));
    let (started, stopped) = start_and_stop(m, function.as_deref());
    Summary {
        program: m.program.clone(),
        cache_name: m.cache_name.clone(),
        levels: m.levels.clone(),
        cores: m.cores,
        window: Window {
            trigger: m.trigger.clone(),
            started,
            stopped,
            cut_short: m.cut_short.clone(),
            mode: capture_mode(m),
            threads: m.threads.clone(),
            duration_ns: m.duration_ns,
        },
        instructions: total(CounterLayout::INSTRUCTIONS_NAME).unwrap_or(m.instructions),
        misses,
        memory: total(MEM),
        unmodelled: unmodelled(m, total(CounterLayout::UNMODELLED_NAME).unwrap_or(0)),
        trapped: trapped(m),
        untraced: untraced(m),
        client_requests: client_requests(m),
        woken_early: woken_early(m),
        data_types: crate::data::coverage(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start_and_stop_of(m: &Meta) -> (String, String) {
        start_and_stop(m, None)
    }

    fn meta(trigger: &str, cut: Option<&str>, notes: &[&str]) -> Meta {
        Meta {
            trigger: trigger.into(),
            cut_short: cut.map(String::from),
            notes: notes.iter().map(|n| n.to_string()).collect(),
            ..Meta::default()
        }
    }

    /// Dumps written before `meta.mode`: the engine's notes.
    #[test]
    fn the_mode_is_read_from_the_engines_note() {
        assert_eq!(capture_mode(&meta("api", None, &[])), "trap");
        assert_eq!(
            capture_mode(&meta(
                "api",
                None,
                &["capture mode fast: 12 instructions ran under the trap engine"]
            )),
            "fast"
        );
        assert_eq!(
            capture_mode(&meta(
                "api",
                None,
                &["capture mode trap: fast mode could not run here (no mmap)"]
            )),
            "trap (fast mode could not run here (no mmap))"
        );
        assert_eq!(
            capture_mode(&meta(
                "api",
                None,
                &[
                    "capture mode fast: 1 instructions",
                    "fast-mode verification: 9 translated instructions checked"
                ]
            )),
            "fast, verified against the trap engine"
        );
        assert_eq!(
            capture_mode(&meta("trace", None, &["re-simulated from the trace t"])),
            "none (simulated from a recorded trace)"
        );
    }

    #[test]
    fn the_mode_is_read_from_its_field_before_any_note() {
        let mut m = meta("api", None, &["capture mode trap: an old note"]);
        m.mode = coldcache_dump::Mode {
            engine: "fast".into(),
            trapped: 811_746,
            trapped_by: vec![
                (1_746, "not handed over yet".into()),
                (810_000, "in a JIT's code".into()),
            ],
            dispatches: 5,
            ..Default::default()
        };
        m.instructions = 120_000_000;
        assert_eq!(capture_mode(&m), "fast");
        assert_eq!(fast_trapped(&m), Some(811_746));
        assert_eq!(trap_fallback(&m), None);
        let t = trapped(&m).unwrap();
        assert_eq!(
            t.text,
            "811,746 of 120,000,000 instructions (0.68%) ran under the trap engine: 1,746 not \
             handed over yet; 810,000 in a JIT's code"
        );
        m.mode = coldcache_dump::Mode {
            engine: "trap".into(),
            fallback: "fast mode could not run here (no mmap)".into(),
            ..Default::default()
        };
        assert_eq!(
            capture_mode(&m),
            "trap (fast mode could not run here (no mmap))"
        );
        assert_eq!(fast_trapped(&m), None);
        assert_eq!(trapped(&m), None);
        m.mode.fallback.clear();
        assert_eq!(capture_mode(&m), "trap");
        assert_eq!(trap_fallback(&m), None);
    }

    #[test]
    fn shortfalls_are_said_in_words_only_when_there_are_some() {
        let mut m = meta("all", None, &[]);
        assert_eq!(unmodelled(&m, 0), None);
        assert_eq!(trapped(&m), None);
        assert_eq!(fast_trapped(&m), None);
        m.instructions = 120_000_000;
        m.unmodelled = vec![("partially masked AVX-512 memory operand".into(), 405_854)];
        let u = unmodelled(&m, 405_854).unwrap();
        assert_eq!(u.count, 405_854);
        assert_eq!(
            u.text,
            "405,854 instructions unmodelled: 405,854 partially masked AVX-512 memory operand"
        );
        // A counter total the classes do not cover (a re-simulated trace).
        m.unmodelled.clear();
        assert_eq!(
            unmodelled(&m, 1).unwrap().text,
            "1 instruction unmodelled: 1 of no recorded class"
        );
        assert!(!unmodelled(&m, 1).unwrap().advice.contains("AVX-512"));
        m.notes = vec!["capture mode fast: 0 instructions ran under the trap engine".into()];
        assert_eq!(fast_trapped(&m), Some(0));
        assert_eq!(trapped(&m), None);
        m.notes = vec!["capture mode fast: 811746 instructions ran under the trap engine".into()];
        assert_eq!(fast_trapped(&m), Some(811_746));
        assert_eq!(
            trapped(&m).unwrap().text,
            "811,746 of 120,000,000 instructions (0.68%) ran under the trap engine"
        );
        assert!(!trapped(&m).unwrap().advice.contains("JIT"));
        // With the engine's causes: each in words, and a JIT's said.
        m.notes.push(
            "fast mode trapped by cause: 1746 not handed over yet (a thread's first \
             instructions); 810000 in code outside the read-only file mappings (a JIT's, or \
             code in writable memory)"
                .into(),
        );
        let t = trapped(&m).unwrap();
        assert_eq!(
            t.text,
            "811,746 of 120,000,000 instructions (0.68%) ran under the trap engine: 1,746 not \
             handed over yet (a thread's first instructions); 810,000 in code outside the \
             read-only file mappings (a JIT's, or code in writable memory)"
        );
        assert!(t.advice.contains("JIT"), "{}", t.advice);
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
    }

    #[test]
    fn waits_ended_early_are_said_by_cause() {
        let mut m = Meta::default();
        assert_eq!(woken_early(&m), None);
        m.woken_early.by_start = 2;
        m.woken_early.by_trigger = 1;
        let w = woken_early(&m).unwrap();
        assert_eq!(w.count, 3);
        assert_eq!(
            w.text,
            "3 waits of the program ended early with EINTR: 2 by the signal that starts a \
             thread's tracing, 1 by the trigger signal (--signal; attach without a trigger \
             starts and stops with it)"
        );
    }

    #[test]
    fn untraced_threads_are_said_with_the_fix() {
        let mut m = meta("all", None, &[]);
        m.threads = "caller".into();
        assert_eq!(untraced(&m), None);
        m.untraced.started = 3;
        let u = untraced(&m).unwrap();
        assert_eq!(u.count, 3);
        assert_eq!(u.text, "3 threads not traced: 3 started during the window");
        assert!(u.advice.contains("threads traced: caller"), "{}", u.advice);
        assert!(u.advice.contains("--threads all"), "{}", u.advice);
        m.untraced.present = 1;
        assert_eq!(
            untraced(&m).unwrap().text,
            "4 threads not traced: 3 started during the window, 1 alive when it began"
        );
        m.untraced.started = 0;
        assert_eq!(
            untraced(&m).unwrap().text,
            "1 thread not traced: 1 alive when it began"
        );
    }

    #[test]
    fn client_requests_are_said_with_whether_they_took_effect() {
        let mut m = meta("function:main", None, &[]);
        assert_eq!(client_requests(&m), None);
        m.client_requests.made = vec![
            ("CALLGRIND_DUMP_STATS".into(), 1),
            ("CALLGRIND_TOGGLE_COLLECT".into(), 2),
        ];
        let c = client_requests(&m).unwrap();
        assert_eq!(
            c.text,
            "3 client requests: 1 CALLGRIND_DUMP_STATS, 2 CALLGRIND_TOGGLE_COLLECT"
        );
        assert!(
            c.advice.contains("record --client-requests"),
            "{}",
            c.advice
        );
        m.client_requests.honoured = true;
        m.part = Some(coldcache_dump::Part {
            number: 1,
            of: 3,
            trigger: "Client Request".into(),
        });
        let c = client_requests(&m).unwrap();
        assert!(c.advice.starts_with("honoured"), "{}", c.advice);
        assert!(
            c.advice
                .contains("3 parts, each a dump of its own: this is part 1"),
            "{}",
            c.advice
        );
    }

    #[test]
    fn the_window_says_what_started_and_stopped_it() {
        let w = start_and_stop_of(&meta("function:run_frames", None, &[]));
        assert_eq!(
            w,
            ("entry to run_frames".into(), "run_frames returned".into())
        );
        let mut m = meta("function:frame", None, &[]);
        m.calls = "1".into();
        assert_eq!(
            start_and_stop_of(&m),
            ("entry to frame".into(), "frame returned".into())
        );
        m.calls = "3".into();
        assert_eq!(
            start_and_stop_of(&m),
            ("entry to frame (call 3)".into(), "frame returned".into())
        );
        m.calls = "3 to 5".into();
        assert_eq!(
            start_and_stop_of(&m),
            (
                "entry to frame (call 3)".into(),
                "frame returned (call 5)".into()
            )
        );
        // The program's exit ended the last call (it never returned).
        m.exit_ended = 5;
        assert_eq!(
            start_and_stop_of(&m).1,
            "the program exited in frame (call 5) (exit() in the call: captured up to the exit)"
        );
        let mut m = meta("function:main", None, &[]);
        (m.calls, m.exit_ended) = ("1".into(), 1);
        assert_eq!(
            start_and_stop_of(&m),
            (
                "entry to main".into(),
                "the program exited in main (exit() in the call: captured up to the exit)".into()
            )
        );
        assert_eq!(
            start_and_stop_of(&meta("trace", None, &[])),
            ("the trace's first record".into(), "its last record".into())
        );
        let w = start_and_stop_of(&meta("signal", Some("the program exited"), &[]));
        assert_eq!(
            w,
            (
                "a signal (`coldcache trigger`)".into(),
                "cut short: the program exited".into()
            )
        );
    }
}
