//! The module list: lines of a `/proc/<pid>/maps` file, parsed. What the
//! unwinder ([`crate::unwind`]) is built from; the capture runtime reads
//! the file (`coldcache_capture::procfs::self_maps`).

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
