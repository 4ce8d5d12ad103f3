//! Text for a person to read, bounded: cut to a number of characters (never inside
//! one), and put on one line. Pure.

/// `text` cut to `max` characters, with `mark` after the cut (none when it fits).
pub fn cut(text: &str, max: usize, mark: &str) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}{mark}", &text[..at]),
        None => text.to_string(),
    }
}

/// `text` on one line: each run of whitespace, line breaks included, one space.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_between_characters_and_marks_only_a_cut() {
        assert_eq!(cut("héllo", 2, "…"), "hé…");
        assert_eq!(cut("hé", 2, "…"), "hé");
        assert_eq!(cut("", 0, "…"), "");
    }

    #[test]
    fn one_line_joins_lines_and_spaces() {
        assert_eq!(one_line(" Run\n the  tests.\n"), "Run the tests.");
    }
}
