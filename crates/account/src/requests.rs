//! Valgrind's client requests (`valgrind.h`, `callgrind.h`,
//! `cachegrind.h`): which request a program made, and what Callgrind's
//! and Cachegrind's collection and instrumentation states become. Pure:
//! the accountant finds the requests and reads their arguments, this file
//! states their meaning once.
//!
//! A request is the *special instruction* sequence: four rotates of RDI
//! that leave it unchanged ([`PREAMBLE`]) and `xchg rbx, rbx`, with RAX
//! pointing at the request's six words (code, then five arguments) and
//! the default result in RDX. Natively it changes nothing; under Valgrind
//! the tool acts on it. The translator refuses `xchg rbx, rbx`
//! (`jit/translate.rs`), so in fast mode too it runs under the trap
//! engine, where the registers and memory are the live ones.
//!
//! Honoured only when asked (`coldcache valgrind`, `record
//! --client-requests`; `coldcache valgrind` only its tool's, as Valgrind's
//! tools ignore each other's): instructions are counted while both
//! collection and instrumentation are on. With instrumentation off the cache is not
//! simulated either (as Valgrind's: nothing of the program runs through
//! its tool then); with collection off it is, but nothing is counted.
//! Either way every request is counted by kind, for the dump.

/// The bytes before `xchg rbx, rbx` that make it a request: `rol rdi, 3;
/// rol rdi, 13; rol rdi, 61; rol rdi, 51`.
pub const PREAMBLE: [u8; 16] = [
    0x48, 0xc1, 0xc7, 0x03, 0x48, 0xc1, 0xc7, 0x0d, 0x48, 0xc1, 0xc7, 0x3d, 0x48, 0xc1, 0xc7, 0x33,
];

/// `VG_USERREQ_TOOL_BASE(a, b)`.
const fn tool_base(a: u8, b: u8) -> u64 {
    ((a as u64) << 24) | ((b as u64) << 16)
}
const CALLGRIND: u64 = tool_base(b'C', b'T');
const CACHEGRIND: u64 = tool_base(b'C', b'G');

/// One client request, by its code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// `CALLGRIND_DUMP_STATS`: the counts so far become a part of the
    /// profile of their own, and start again from zero.
    DumpStats,
    /// `CALLGRIND_ZERO_STATS`: every counter so far back to zero.
    ZeroStats,
    /// `CALLGRIND_TOGGLE_COLLECT`: collection flips.
    ToggleCollect,
    /// `CALLGRIND_DUMP_STATS_AT(label)`: as `DumpStats`, the part named.
    DumpStatsAt,
    /// `CALLGRIND_START_INSTRUMENTATION`.
    StartInstrumentation,
    /// `CALLGRIND_STOP_INSTRUMENTATION`.
    StopInstrumentation,
    /// `CACHEGRIND_START_INSTRUMENTATION` (Valgrind 3.22).
    CachegrindStart,
    /// `CACHEGRIND_STOP_INSTRUMENTATION` (Valgrind 3.22).
    CachegrindStop,
    /// Any other code (Memcheck's, `RUNNING_ON_VALGRIND`, ...): left
    /// with its default result, as natively.
    Other,
}

impl Request {
    /// Every kind, in the order the dump lists them.
    pub const ALL: [Request; 9] = [
        Request::DumpStats,
        Request::ZeroStats,
        Request::ToggleCollect,
        Request::DumpStatsAt,
        Request::StartInstrumentation,
        Request::StopInstrumentation,
        Request::CachegrindStart,
        Request::CachegrindStop,
        Request::Other,
    ];

    /// The request a code names (`callgrind.h`'s and `cachegrind.h`'s
    /// enumerations).
    pub fn from_code(code: u64) -> Request {
        match code {
            c if c == CALLGRIND => Request::DumpStats,
            c if c == CALLGRIND + 1 => Request::ZeroStats,
            c if c == CALLGRIND + 2 => Request::ToggleCollect,
            c if c == CALLGRIND + 3 => Request::DumpStatsAt,
            c if c == CALLGRIND + 4 => Request::StartInstrumentation,
            c if c == CALLGRIND + 5 => Request::StopInstrumentation,
            c if c == CACHEGRIND => Request::CachegrindStart,
            c if c == CACHEGRIND + 1 => Request::CachegrindStop,
            _ => Request::Other,
        }
    }

    /// Its macro's name, as the program's source spells it.
    pub fn name(self) -> &'static str {
        match self {
            Request::DumpStats => "CALLGRIND_DUMP_STATS",
            Request::ZeroStats => "CALLGRIND_ZERO_STATS",
            Request::ToggleCollect => "CALLGRIND_TOGGLE_COLLECT",
            Request::DumpStatsAt => "CALLGRIND_DUMP_STATS_AT",
            Request::StartInstrumentation => "CALLGRIND_START_INSTRUMENTATION",
            Request::StopInstrumentation => "CALLGRIND_STOP_INSTRUMENTATION",
            Request::CachegrindStart => "CACHEGRIND_START_INSTRUMENTATION",
            Request::CachegrindStop => "CACHEGRIND_STOP_INSTRUMENTATION",
            Request::Other => "other requests (left with their default result)",
        }
    }

    fn index(self) -> usize {
        Request::ALL.iter().position(|&r| r == self).unwrap_or(8)
    }

    /// The tool whose request it is; `None` for [`Request::Other`].
    pub fn tool(self) -> Option<Tool> {
        match self {
            Request::CachegrindStart | Request::CachegrindStop => Some(Tool::Cachegrind),
            Request::Other => None,
            _ => Some(Tool::Callgrind),
        }
    }
}

/// Which tool's requests a capture honours (Valgrind's tools ignore each
/// other's: Cachegrind does nothing on `CALLGRIND_TOGGLE_COLLECT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// `callgrind.h`'s.
    Callgrind,
    /// `cachegrind.h`'s.
    Cachegrind,
}

/// The states a capture that honours requests starts in
/// (`--collect-atstart`, `--instr-atstart`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Honour {
    /// Collection on at the start.
    pub collect: bool,
    /// Instrumentation on at the start.
    pub instr: bool,
    /// Only this tool's requests (`coldcache valgrind --tool`); `None`:
    /// both tools'.
    pub only: Option<Tool>,
}

impl Honour {
    /// `COLDCACHE_CLIENT_REQUESTS`: `collect=yes|no,instr=yes|no,
    /// only=callgrind|cachegrind` (each may be left out: `yes`, `yes`, both
    /// tools), or `1` (the defaults).
    pub fn parse(s: &str) -> Result<Honour, String> {
        let mut h = Honour {
            collect: true,
            instr: true,
            only: None,
        };
        if s == "1" {
            return Ok(h);
        }
        for part in s.split(',') {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("`{part}` is not collect=yes|no, instr=yes|no or only=TOOL")
            })?;
            if key == "only" {
                h.only = Some(match value {
                    "callgrind" => Tool::Callgrind,
                    "cachegrind" => Tool::Cachegrind,
                    _ => return Err(format!("`{part}`: only is callgrind or cachegrind")),
                });
                continue;
            }
            let on = match value {
                "yes" => true,
                "no" => false,
                _ => return Err(format!("`{part}`: {key} is yes or no")),
            };
            match key {
                "collect" => h.collect = on,
                "instr" => h.instr = on,
                _ => return Err(format!("`{part}`: {key} is not collect, instr or only")),
            }
        }
        Ok(h)
    }

    /// As [`Honour::parse`] reads it.
    pub fn describe(&self) -> String {
        let yn = |b: bool| if b { "yes" } else { "no" };
        let mut s = format!("collect={},instr={}", yn(self.collect), yn(self.instr));
        match self.only {
            Some(Tool::Callgrind) => s.push_str(",only=callgrind"),
            Some(Tool::Cachegrind) => s.push_str(",only=cachegrind"),
            None => {}
        }
        s
    }
}

/// What the caller must do after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing beyond the states.
    None,
    /// Zero every counter so far (`ZERO_STATS`).
    Zero,
    /// Set the counts so far aside as a part of the profile, then zero
    /// them (`DUMP_STATS`, `DUMP_STATS_AT`).
    Dump,
}

/// The requests of one capture: the states and how many of each kind.
#[derive(Clone, Debug)]
pub struct Requests {
    honour: Option<Honour>,
    collect: bool,
    instr: bool,
    seen: [u64; Request::ALL.len()],
}

impl Requests {
    /// Requests honoured from the states of `honour`; `None`: only counted.
    pub fn new(honour: Option<Honour>) -> Requests {
        let h = honour.unwrap_or(Honour {
            collect: true,
            instr: true,
            only: None,
        });
        Requests {
            honour,
            collect: h.collect,
            instr: h.instr,
            seen: [0; Request::ALL.len()],
        }
    }

    /// Whether instructions are counted now.
    #[inline]
    pub fn counting(&self) -> bool {
        self.collect && self.instr
    }

    /// Whether instructions run through the cache now.
    #[inline]
    pub fn simulating(&self) -> bool {
        self.instr
    }

    /// Takes request `r` (counted; acted on when honoured).
    pub fn take(&mut self, r: Request) -> Effect {
        self.seen[r.index()] += 1;
        let Some(h) = self.honour else {
            return Effect::None;
        };
        if r.tool().is_none() || h.only.is_some_and(|t| Some(t) != r.tool()) {
            return Effect::None;
        }
        match r {
            Request::ToggleCollect => self.collect = !self.collect,
            Request::StartInstrumentation | Request::CachegrindStart => self.instr = true,
            Request::StopInstrumentation | Request::CachegrindStop => self.instr = false,
            Request::ZeroStats => return Effect::Zero,
            Request::DumpStats | Request::DumpStatsAt => return Effect::Dump,
            Request::Other => {}
        }
        Effect::None
    }

    /// Whether a `ZERO_STATS` or a `DUMP_STATS` may have been acted on
    /// (rows may hold zeros).
    pub fn zeroed(&self) -> bool {
        self.honoured()
            && [Request::ZeroStats, Request::DumpStats, Request::DumpStatsAt]
                .iter()
                .any(|r| self.seen[r.index()] > 0)
    }

    /// Whether requests are acted on.
    pub fn honoured(&self) -> bool {
        self.honour.is_some()
    }

    /// The requests made, by kind, in [`Request::ALL`]'s order (kinds
    /// not made left out).
    pub fn seen(&self) -> Vec<(String, u64)> {
        Request::ALL
            .iter()
            .zip(self.seen)
            .filter(|&(_, n)| n > 0)
            .map(|(r, n)| (r.name().to_string(), n))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The codes as `callgrind.h` and `cachegrind.h` number them:
    /// `VG_USERREQ_TOOL_BASE('C','T')` = 0x43540000 upwards, 'C','G'
    /// = 0x43470000 upwards.
    #[test]
    fn codes_are_valgrinds() {
        assert_eq!(Request::from_code(0x4354_0000), Request::DumpStats);
        assert_eq!(Request::from_code(0x4354_0001), Request::ZeroStats);
        assert_eq!(Request::from_code(0x4354_0002), Request::ToggleCollect);
        assert_eq!(Request::from_code(0x4354_0003), Request::DumpStatsAt);
        assert_eq!(
            Request::from_code(0x4354_0004),
            Request::StartInstrumentation
        );
        assert_eq!(
            Request::from_code(0x4354_0005),
            Request::StopInstrumentation
        );
        assert_eq!(Request::from_code(0x4347_0000), Request::CachegrindStart);
        assert_eq!(Request::from_code(0x4347_0001), Request::CachegrindStop);
        // RUNNING_ON_VALGRIND.
        assert_eq!(Request::from_code(0x1001), Request::Other);
    }

    #[test]
    fn states_follow_the_requests_only_when_honoured() {
        let mut r = Requests::new(Some(Honour::parse("collect=no,instr=no").unwrap()));
        assert!(!r.counting() && !r.simulating());
        r.take(Request::CachegrindStart);
        assert!(r.simulating() && !r.counting());
        r.take(Request::ToggleCollect);
        assert!(r.counting());
        r.take(Request::StopInstrumentation);
        assert!(!r.counting() && !r.simulating());
        r.take(Request::StartInstrumentation);
        assert!(r.counting());
        assert_eq!(r.take(Request::ZeroStats), Effect::Zero);
        assert_eq!(r.take(Request::DumpStats), Effect::Dump);
        r.take(Request::ToggleCollect);
        assert!(!r.counting() && r.simulating());
        assert_eq!(
            r.seen(),
            vec![
                ("CALLGRIND_DUMP_STATS".to_string(), 1),
                ("CALLGRIND_ZERO_STATS".to_string(), 1),
                ("CALLGRIND_TOGGLE_COLLECT".to_string(), 2),
                ("CALLGRIND_START_INSTRUMENTATION".to_string(), 1),
                ("CALLGRIND_STOP_INSTRUMENTATION".to_string(), 1),
                ("CACHEGRIND_START_INSTRUMENTATION".to_string(), 1),
            ]
        );
        // Not honoured: counted, nothing changes.
        let mut r = Requests::new(None);
        assert_eq!(r.take(Request::ZeroStats), Effect::None);
        r.take(Request::StopInstrumentation);
        assert!(r.counting() && r.simulating() && !r.honoured());
        assert_eq!(r.seen().len(), 2);
        // One tool's: the other's requests are counted, not acted on.
        let mut r = Requests::new(Some(Honour::parse("instr=no,only=cachegrind").unwrap()));
        r.take(Request::StartInstrumentation);
        assert!(!r.simulating());
        r.take(Request::CachegrindStart);
        assert!(r.counting());
        assert_eq!(r.take(Request::ZeroStats), Effect::None);
    }

    #[test]
    fn settings_parse_and_refuse_with_the_reason() {
        assert_eq!(
            Honour::parse("1").unwrap(),
            Honour {
                collect: true,
                instr: true,
                only: None,
            }
        );
        let h = Honour::parse("instr=no,only=cachegrind").unwrap();
        assert_eq!(h.only, Some(Tool::Cachegrind));
        assert_eq!(Honour::parse(&h.describe()).unwrap(), h);
        assert!(Honour::parse("only=memcheck").is_err());
        let h = Honour::parse("instr=no").unwrap();
        assert!(h.collect && !h.instr);
        assert_eq!(Honour::parse(&h.describe()).unwrap(), h);
        assert!(Honour::parse("instr=maybe")
            .unwrap_err()
            .contains("yes or no"));
        assert!(Honour::parse("dump=no")
            .unwrap_err()
            .contains("not collect, instr or only"));
        assert!(Honour::parse("on").is_err());
    }
}
