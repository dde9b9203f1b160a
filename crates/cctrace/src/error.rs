//! Error types. Every message names the input (the name the caller gave,
//! usually the file path) and where in it the problem is: the line for text
//! formats, the byte offset and chunk for cctrace.

use std::io;

use crate::MAX_ACCESS_SIZE;

/// Any error of reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The input could not be opened or read (this includes corrupt
    /// gzip/zstd data, which the decompressors report as read errors).
    #[error("{name}: {error}")]
    Io {
        /// Input name (path).
        name: String,
        /// The underlying error.
        error: io::Error,
    },
    /// A malformed line of a text trace.
    #[error("{name}:{line}: {error}")]
    Parse {
        /// Input name (path).
        name: String,
        /// 1-based line number, counting banner and blank lines.
        line: u64,
        /// What is wrong with the line.
        error: ParseError,
    },
    /// The input holds no record.
    #[error("{name}: {}", empty_message(*skipped))]
    Empty {
        /// Input name (path).
        name: String,
        /// Malformed lines skipped (with skip-bad on) before concluding so.
        skipped: u64,
    },
    /// The input is binary data but not a cctrace file.
    #[error("{name}: not a trace: binary data that is neither a cctrace file nor text")]
    NotATrace {
        /// Input name (path).
        name: String,
    },
    /// The first record line is neither lackey nor din.
    #[error(
        "{name}:{line}: cannot tell the trace format: {text} is neither a lackey record \
         (like ` L 7ff0005c8,8`) nor a Dinero din record (like `0 7ff0005c8`)"
    )]
    UnknownFormat {
        /// Input name (path).
        name: String,
        /// 1-based line number of the line looked at.
        line: u64,
        /// The line, quoted and shortened.
        text: String,
    },
    /// A cctrace file is invalid.
    #[error("{name}: {error}")]
    Binary {
        /// Input name (path).
        name: String,
        /// What is wrong, and where.
        error: BinaryError,
    },
    /// Writing a trace failed.
    #[error("writing trace: {0}")]
    Write(io::Error),
    /// [`crate::TraceWriter`] was given something no reader would accept
    /// back (a record of size 0, metadata over the limit).
    #[error("cannot write trace: {0}")]
    InvalidInput(String),
}

fn empty_message(skipped: u64) -> String {
    if skipped == 0 {
        "empty file (no records)".to_string()
    } else {
        format!("no valid records ({skipped} malformed lines skipped)")
    }
}

/// What is wrong with a line of a text trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// A character that is not a hex digit inside an address.
    #[error("bad hex digit {} in address \"{}\"", quote_byte(*byte), token)]
    BadHexDigit {
        /// The offending byte.
        byte: u8,
        /// The address as written (shortened, escaped).
        token: String,
    },
    /// More significant hex digits than fit in 64 bits.
    #[error("address \"{token}\" does not fit in 64 bits (more than 16 hex digits)")]
    AddressOverflow {
        /// The address as written.
        token: String,
    },
    /// The line ends after the record kind / label.
    #[error("truncated record: missing address after '{kind}'")]
    MissingAddress {
        /// The kind letter or label.
        kind: String,
    },
    /// Lackey: no `,SIZE` after the address.
    #[error("truncated record: missing ',' and size after address \"{addr}\"")]
    MissingComma {
        /// The address as written.
        addr: String,
    },
    /// Lackey: the line ends right after the ','.
    #[error("truncated record: missing size after ','")]
    MissingSize,
    /// The size is not a decimal number.
    #[error("bad size \"{token}\" (expected a decimal number)")]
    BadSize {
        /// The size as written.
        token: String,
    },
    /// Size 0.
    #[error("size 0 is not allowed")]
    ZeroSize,
    /// A size over [`MAX_ACCESS_SIZE`].
    #[error("size {token} is too large (at most {MAX_ACCESS_SIZE} bytes)")]
    SizeTooLarge {
        /// The size as written.
        token: String,
    },
    /// The kind letter (lackey) or label (din) is not one the format has.
    #[error("unknown record kind '{found}' (expected {expected})")]
    UnknownKind {
        /// The kind as written (escaped).
        found: String,
        /// The kinds the format has.
        expected: &'static str,
    },
    /// Din label 3: "escape record, unknown access type", which has no
    /// meaning to simulate.
    #[error("unknown record kind '3' (din escape record of unknown access type; not supported)")]
    DineroUnknownAccess,
    /// Text after the last field.
    #[error("unexpected \"{text}\" after the record")]
    TrailingText {
        /// The extra text (shortened, escaped).
        text: String,
    },
    /// NUL bytes or invalid UTF-8 inside a text trace.
    #[error("binary data (NUL or non-UTF-8 bytes) in a text trace")]
    BinaryData,
    /// A line longer than any record line could be.
    #[error("line longer than {0} bytes (not a text trace?)")]
    LineTooLong(usize),
}

/// What is wrong with a cctrace file. Offsets are byte offsets in the
/// (decompressed) cctrace stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinaryError {
    /// The first 8 bytes are not the cctrace magic (only when the format
    /// was forced to binary).
    #[error(
        "not a cctrace file: bad magic {} at byte 0 (expected \"CCTRACE\\0\")",
        hex(found)
    )]
    BadMagic {
        /// The bytes found.
        found: Vec<u8>,
    },
    /// A version this reader does not know.
    #[error(
        "unsupported cctrace version {version} at byte 8 (this reader reads versions 1 to {supported})"
    )]
    UnsupportedVersion {
        /// Version in the file.
        version: u16,
        /// Newest version this reader reads.
        supported: u16,
    },
    /// Header flags this reader does not know.
    #[error("unsupported cctrace header flags {flags:#06x} at byte 10")]
    UnsupportedFlags {
        /// Flags in the file.
        flags: u16,
    },
    /// The header (or its metadata) is cut short or invalid.
    #[error("bad header at byte {offset}: {detail}")]
    BadHeader {
        /// Byte offset.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The file ends inside a chunk.
    #[error(
        "chunk {chunk} at byte {offset}: truncated {what} (needs {needed} bytes, file ends after {got})"
    )]
    Truncated {
        /// 0-based chunk index.
        chunk: u64,
        /// Byte offset of the chunk's header.
        offset: u64,
        /// "chunk header" or "chunk payload".
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes present.
        got: u64,
    },
    /// The payload's CRC32 differs from the one stored.
    #[error(
        "chunk {chunk} at byte {offset}: CRC mismatch (stored {stored:#010x}, computed {computed:#010x}): corrupt data"
    )]
    CrcMismatch {
        /// 0-based chunk index.
        chunk: u64,
        /// Byte offset of the chunk's header.
        offset: u64,
        /// CRC in the chunk header.
        stored: u32,
        /// CRC of the payload read.
        computed: u32,
    },
    /// A payload length over the limit.
    #[error("chunk {chunk} at byte {offset}: payload length {len} over the limit of {max} bytes")]
    ChunkTooLarge {
        /// 0-based chunk index.
        chunk: u64,
        /// Byte offset of the chunk's header.
        offset: u64,
        /// Length in the header.
        len: u64,
        /// Limit.
        max: u64,
    },
    /// A payload that passed its CRC but does not decode (a writer bug).
    #[error("chunk {chunk} at byte {offset}: corrupt payload at payload byte {pos}: {detail}")]
    Corrupt {
        /// 0-based chunk index.
        chunk: u64,
        /// Byte offset of the chunk's header.
        offset: u64,
        /// Offset inside the payload.
        pos: u64,
        /// What is wrong.
        detail: String,
    },
    /// The file ends after a whole chunk but without the end marker.
    #[error(
        "truncated: no end-of-trace marker after chunk {chunks} (file ends at byte {offset}; cut short?)"
    )]
    MissingEnd {
        /// Chunks read.
        chunks: u64,
        /// Where the file ends.
        offset: u64,
    },
    /// The end marker's totals disagree with the chunks.
    #[error(
        "end-of-trace marker at byte {offset} counts {stored} records, the chunks hold {counted}"
    )]
    CountMismatch {
        /// Byte offset of the marker.
        offset: u64,
        /// Count in the marker.
        stored: u64,
        /// Count of records decoded.
        counted: u64,
    },
    /// Bytes after the end marker.
    #[error("data after the end-of-trace marker at byte {offset}")]
    TrailingData {
        /// Byte offset of the first extra byte.
        offset: u64,
    },
}

fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `'g'` for printable ASCII, `'\x00'` / `'\xc3'` otherwise.
fn quote_byte(b: u8) -> String {
    if b.is_ascii_graphic() || b == b' ' {
        format!("'{}'", b as char)
    } else {
        format!("'\\x{b:02x}'")
    }
}

/// Text of `bytes` for an error message: printable ASCII as is, anything
/// else escaped, shortened to 40 characters.
pub fn show(bytes: &[u8]) -> String {
    const MAX: usize = 40;
    let mut s = String::new();
    for &b in bytes.iter().take(MAX) {
        if b.is_ascii_graphic() || b == b' ' {
            if b == b'"' || b == b'\\' {
                s.push('\\');
            }
            s.push(b as char);
        } else if b == b'\t' {
            s.push_str("\\t");
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    if bytes.len() > MAX {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_escapes() {
        assert_eq!(show(b"7ff0g"), "7ff0g");
        assert_eq!(show(b"a\0\"b"), "a\\x00\\\"b");
        assert_eq!(show(&[b'x'; 50]).chars().count(), 41);
        assert_eq!(quote_byte(b'g'), "'g'");
        assert_eq!(quote_byte(0), "'\\x00'");
    }

    #[test]
    fn messages() {
        let e = TraceError::Parse {
            name: "trace.txt".into(),
            line: 17,
            error: ParseError::BadHexDigit {
                byte: b'g',
                token: "7ff0g".into(),
            },
        };
        assert_eq!(
            e.to_string(),
            "trace.txt:17: bad hex digit 'g' in address \"7ff0g\""
        );
        let e = TraceError::Empty {
            name: "t".into(),
            skipped: 0,
        };
        assert_eq!(e.to_string(), "t: empty file (no records)");
    }
}
