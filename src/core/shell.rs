//! A word for a POSIX shell, quoted when it needs it (the service's printed calls, the
//! hook commands written into a harness's settings). Pure.

/// `s` as one shell word: as it is when every character is plain, else single-quoted.
pub fn quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
