//! How a count is written for a person, the same in every text coldcache
//! prints (`report`, `sim`'s tables, the Valgrind-style summaries, the
//! progress line): here, in the one crate all of their writers read.

/// `1234567` as `1,234,567` (Valgrind prints its counts so too).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(279442), "279,442");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
