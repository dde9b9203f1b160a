//! The lines of a `/proc/<pid>/maps` file, parsed: the module list the
//! accountant's unwinder is built from (`coldcache_account::unwind`; the
//! capture runtime reads its own, `coldcache_capture::procfs::self_maps`),
//! and what `coldcache attach` reads of a process (`coldcache_inject`).

/// One line of `/proc/self/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// `r-xp` and friends.
    pub perms: String,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// Path (or pseudo-name such as `[stack]`), possibly empty.
    pub path: String,
}

/// Parses the text of a `maps` file.
pub fn parse_maps(text: &str) -> Vec<Mapping> {
    let mut v = Vec::new();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset), Some(_dev), Some(_inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.collect::<Vec<_>>().join(" ");
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        v.push(Mapping {
            start,
            end,
            perms: perms.to_string(),
            offset,
            path,
        });
    }
    v
}
