//! `--since` of `history` and `stats`: a span back from now (`90m`, `24h`, `7d`, `2w`)
//! or a local date (`2026-12-01`, from its midnight). A date is turned into a time by
//! the history's database, which knows the local time zone.

use thiserror::Error;

/// Where a listing starts.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// This many seconds before now.
    Ago(f64),
    /// Local midnight of this `YYYY-MM-DD` date.
    Date(String),
}

/// A `--since` that is neither.
#[derive(Debug, Clone, PartialEq, Error)]
#[error(
    "--since {0:?} is not a span or a date; give a number and a unit (30m, 24h, 7d, 2w) or \
     a date (2026-12-01)"
)]
pub struct SinceError(pub String);

impl Since {
    /// Reads a `--since` value.
    pub fn parse(text: &str) -> Result<Since, SinceError> {
        let text = text.trim();
        let bad = || SinceError(text.to_string());
        if is_date(text) {
            return Ok(Since::Date(text.to_string()));
        }
        let unit_at = text
            .len()
            .checked_sub(1)
            .filter(|&at| text.is_char_boundary(at))
            .ok_or_else(bad)?;
        let (number, unit) = text.split_at(unit_at);
        let seconds = match unit {
            "m" => 60.0,
            "h" => 3_600.0,
            "d" => 86_400.0,
            "w" => 7.0 * 86_400.0,
            _ => return Err(bad()),
        };
        match number.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Since::Ago(f64::from(n) * seconds)),
            _ => Err(bad()),
        }
    }
}

/// `YYYY-MM-DD` with a plausible month and day (the database checks the rest).
fn is_date(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let number = |s: &str, len: usize, max: u32| {
        s.len() == len
            && s.bytes().all(|b| b.is_ascii_digit())
            && s.parse::<u32>().is_ok_and(|n| (1..=max).contains(&n))
    };
    matches!(parts.as_slice(), [y, m, d] if number(y, 4, 9999) && number(m, 2, 12) && number(d, 2, 31))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_dates() {
        assert_eq!(Since::parse("24h"), Ok(Since::Ago(86_400.0)));
        assert_eq!(Since::parse("7d"), Ok(Since::Ago(7.0 * 86_400.0)));
        assert_eq!(Since::parse("30m"), Ok(Since::Ago(1_800.0)));
        assert_eq!(Since::parse("2w"), Ok(Since::Ago(14.0 * 86_400.0)));
        assert_eq!(
            Since::parse("2026-12-01"),
            Ok(Since::Date("2026-12-01".into()))
        );
    }

    #[test]
    fn anything_else_says_what_to_give() {
        for bad in [
            "",
            "h",
            "0h",
            "-1d",
            "7",
            "7y",
            "1.5h",
            "2026-13-01",
            "2026-1-01",
            "yesterday",
            "5é",
        ] {
            let e = Since::parse(bad).unwrap_err();
            assert!(
                e.to_string().contains("give a number and a unit"),
                "{bad}: {e}"
            );
        }
    }
}
