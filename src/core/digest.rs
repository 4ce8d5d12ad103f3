//! The crate's hashes as lowercase hex: SHA-1 (verdict folders, temp names, cache,
//! single-flight, health and hook job keys) and SHA-256 (codex's hook trust hash, a
//! pinned project rules file). Pure.

use sha1::{Digest, Sha1};
use sha2::Sha256;

/// Lowercase hex of the first `bytes` bytes (at most 20) of SHA-1 of `data`.
pub fn sha1_hex(data: &[u8], bytes: usize) -> String {
    hex(Sha1::digest(data).iter().take(bytes))
}

/// All of SHA-256 of `data` as 64 hex digits.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(Sha256::digest(data).iter())
}

fn hex<'a>(bytes: impl Iterator<Item = &'a u8>) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::new();
    for b in bytes {
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
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
