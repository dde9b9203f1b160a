//! Byte sizes as people write them: `32768`, `"48K"`, `"48KiB"`, `"2M"`,
//! `"1.25MiB"`, `"1G"`, `"1T"`. Every unit is binary (K = KiB = 1024), as
//! cache sizes always are; the result must be a whole number of bytes. The
//! one size parser of the workspace's configurations and capture budgets
//! (`--memory`, `--reserve memory=`); the zones library, which links none
//! of this, reads its arena size itself.

/// The units [`parse_size`] accepts, for error messages.
pub const SIZE_UNITS: &str = "bytes, or a number with K, KiB, M, MiB, G, GiB, T, TiB";

/// A string that is not a size, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} {problem}")]
pub struct SizeError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it, e.g. "is not a size (expected ...)".
    pub problem: String,
}

fn not_a_size(text: &str) -> SizeError {
    SizeError {
        text: text.to_string(),
        problem: format!("is not a size (expected {SIZE_UNITS})"),
    }
}

/// Parses a byte size: a whole number of bytes (`"32768"`, `"32768B"`), or a
/// number, optionally with a decimal fraction, followed by a binary unit
/// `K`/`KiB`/`KB`, `M`/`MiB`/`MB`, `G`/`GiB`/`GB` or `T`/`TiB`/`TB` (any letter case, an
/// optional space before the unit). `"1.25MiB"` is 1310720 bytes; `"1.3K"` is
/// an error because it is not a whole number of bytes.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(num_end);
    let unit = unit.trim_start();
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0u32,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(not_a_size(text)),
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(not_a_size(text));
    }
    if frac.len() > 18 {
        return Err(SizeError {
            text: text.to_string(),
            problem: "has too many decimals".into(),
        });
    }
    let too_big = || SizeError {
        text: text.to_string(),
        problem: "is too large".into(),
    };
    let parse = |s: &str| -> Result<u128, SizeError> {
        if s.is_empty() {
            Ok(0)
        } else {
            s.parse::<u128>().map_err(|_| too_big())
        }
    };
    let scale = 10u128.pow(frac.len() as u32);
    let whole = parse(int)?;
    let scaled = whole
        .checked_mul(scale)
        .and_then(|v| v.checked_add(parse(frac).ok()?))
        .and_then(|v| v.checked_mul(1u128 << shift))
        .ok_or_else(too_big)?;
    if scaled % scale != 0 {
        return Err(SizeError {
            text: text.to_string(),
            problem: "is not a whole number of bytes".into(),
        });
    }
    u64::try_from(scaled / scale).map_err(|_| too_big())
}

/// Formats a byte count the way [`parse_size`] reads it back: `"48KiB"`,
/// `"2MiB"`, `"1920KiB"`, or the plain number when no unit divides it.
pub fn format_size(bytes: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_sizes() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("32768", 32768),
            ("64B", 64),
            ("48K", 48 << 10),
            ("48k", 48 << 10),
            ("48KiB", 48 << 10),
            ("48 KiB", 48 << 10),
            ("48KB", 48 << 10),
            ("2M", 2 << 20),
            ("2MiB", 2 << 20),
            ("1.25MiB", 1_310_720),
            ("1.875M", 1_966_080),
            ("0.5K", 512),
            (".5K", 512),
            ("4.K", 4096),
            ("1G", 1 << 30),
            ("1GiB", 1 << 30),
            ("2T", 2 << 40),
            ("1.5TiB", 3 << 39),
            ("  16K ", 16 << 10),
            ("32768K", 32 << 20),
        ];
        for &(text, want) in cases {
            assert_eq!(parse_size(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn bad_sizes() {
        let cases: &[(&str, &str)] = &[
            (
                "48Q",
                "\"48Q\" is not a size (expected bytes, or a number with K, KiB, M, MiB, G, GiB, T, TiB)",
            ),
            ("", "\"\" is not a size"),
            ("K", "\"K\" is not a size"),
            (".", "\".\" is not a size"),
            ("1.2.3K", "\"1.2.3K\" is not a size"),
            ("-4K", "\"-4K\" is not a size"),
            ("4 K B", "\"4 K B\" is not a size"),
            ("1.3K", "\"1.3K\" is not a whole number of bytes"),
            ("0.5", "\"0.5\" is not a whole number of bytes"),
            ("99999999999999999999999G", "is too large"),
            ("20000000000G", "is too large"),
            ("1.0000000000000000000001K", "too many decimals"),
        ];
        for &(text, want) in cases {
            let e = parse_size(text).expect_err(text).to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn format_round_trips() {
        for b in [
            0,
            1,
            64,
            1000,
            1024,
            1536,
            48 << 10,
            1_966_080,
            2 << 20,
            15 << 20,
            3 << 30,
            u64::MAX,
        ] {
            assert_eq!(parse_size(&format_size(b)), Ok(b), "{b}");
        }
        assert_eq!(format_size(48 << 10), "48KiB");
        assert_eq!(format_size(1_966_080), "1920KiB");
        assert_eq!(format_size(2 << 20), "2MiB");
        assert_eq!(format_size(1000), "1000");
    }
}
