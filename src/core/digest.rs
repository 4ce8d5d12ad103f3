//! The one hash of the crate: SHA-1 as lowercase hex (verdict folders, temp names,
//! cache, single-flight and health keys). Pure.

use sha1::{Digest, Sha1};

/// Lowercase hex of the first `bytes` bytes (at most 20) of SHA-1 of `data`.
pub fn sha1_hex(data: &[u8], bytes: usize) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(2 * bytes.min(20));
    for b in Sha1::digest(data).iter().take(bytes) {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// All of SHA-1 of `data` as 40 hex digits.
pub fn sha1_hex_full(data: &[u8]) -> String {
    sha1_hex(data, 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests() {
        assert_eq!(
            sha1_hex_full(b"abc"),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(sha1_hex(b"abc", 8), "a9993e364706816a");
    }
}
