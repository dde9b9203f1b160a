//! The summary of a capture a person reads first: what ran (the program),
//! on which simulated cache, over which window (what started and stopped
//! it, whether it was cut short, which capture mode ran), and the totals —
//! instructions, and misses per cache level.
//!
//! The web UI shows it at the top of its default page (`/api/meta` carries
//! it per dump). Counts are the profile's totals (the `TOTAL` row of
//! `coldcache report`), misses per level the same derived columns every view
//! shows (`i_miss_<L>`, `d_miss_<L>`, `mem`, [`crate::columns`]).

use crate::columns::{Column, D_MISS, I_MISS, MEM};
use crate::profile::Profile;
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

/// The capture mode a dump was made in, from the note the capture engine
/// writes (`capture mode fast: …`, `capture mode trap: …`): `fast`,
/// `trap (why fast mode could not run)`, with `, verified` when fast mode
/// was checked against the trap engine; `trap` without a note (trap mode
/// asked for, or a dump made before fast mode existed).
pub fn capture_mode(meta: &Meta) -> String {
    // A dump re-simulated from a trace that no capture wrote (lackey, din,
    // a converted cctrace): no engine ran.
    if meta.trigger == "trace" {
        return "none (simulated from a recorded trace)".to_string();
    }
    let note = |prefix: &str| meta.notes.iter().find_map(|n| n.strip_prefix(prefix));
    let mut mode = if note("capture mode fast: ").is_some() {
        "fast".to_string()
    } else if let Some(why) = note("capture mode trap: ") {
        format!("trap ({why})")
    } else {
        "trap".to_string()
    };
    if note("fast-mode verification: ").is_some() {
        mode.push_str(", verified against the trap engine");
    }
    mode
}

/// What started and what stopped a capture with this trigger, in words.
fn start_and_stop(meta: &Meta) -> (String, String) {
    let (started, stopped) = match meta.trigger.split_once(':') {
        Some(("function", name)) => match meta.calls.split_once(" to ") {
            Some((first, last)) => (
                format!("entry to {name} (call {first})"),
                format!("{name} returned (call {last})"),
            ),
            // The first call (the default) needs no saying.
            None if !meta.calls.is_empty() && meta.calls != "1" => (
                format!("entry to {name} (call {})", meta.calls),
                format!("{name} returned"),
            ),
            None => (format!("entry to {name}"), format!("{name} returned")),
        },
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
    let (started, stopped) = start_and_stop(m);
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(trigger: &str, cut: Option<&str>, notes: &[&str]) -> Meta {
        Meta {
            trigger: trigger.into(),
            cut_short: cut.map(String::from),
            notes: notes.iter().map(|n| n.to_string()).collect(),
            ..Meta::default()
        }
    }

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
    fn the_window_says_what_started_and_stopped_it() {
        let w = start_and_stop(&meta("function:run_frames", None, &[]));
        assert_eq!(
            w,
            ("entry to run_frames".into(), "run_frames returned".into())
        );
        let mut m = meta("function:frame", None, &[]);
        m.calls = "1".into();
        assert_eq!(
            start_and_stop(&m),
            ("entry to frame".into(), "frame returned".into())
        );
        m.calls = "3".into();
        assert_eq!(
            start_and_stop(&m),
            ("entry to frame (call 3)".into(), "frame returned".into())
        );
        m.calls = "3 to 5".into();
        assert_eq!(
            start_and_stop(&m),
            (
                "entry to frame (call 3)".into(),
                "frame returned (call 5)".into()
            )
        );
        assert_eq!(
            start_and_stop(&meta("trace", None, &[])),
            ("the trace's first record".into(), "its last record".into())
        );
        let w = start_and_stop(&meta("signal", Some("the program exited"), &[]));
        assert_eq!(
            w,
            (
                "a signal (`coldcache trigger`)".into(),
                "cut short: the program exited".into()
            )
        );
    }
}
