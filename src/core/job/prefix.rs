//! The `transcript` of a job file too large to read whole, from its first bytes: a
//! hook-written job names its transcript near the start, and its `judge error`
//! verdict belongs in that transcript's folder, where `drain` finds it. Pure: no I/O.

/// How much of an oversized job file is read for its transcript.
pub const PREFIX_BYTES: usize = 64 * 1024;

/// The top-level `"transcript"` string of the JSON object that `prefix` begins, when
/// it is whole inside `prefix` (the last one, as a full parse would take, when a key
/// repeats). `None` when the prefix is not the start of an object, the key is not in
/// it, is cut off, or holds something other than a string.
pub fn transcript_in_prefix(prefix: &[u8]) -> Option<String> {
    let mut scan = Scan {
        bytes: prefix,
        at: 0,
    };
    let mut found = None;
    scan.skip_space();
    scan.eat(b'{')?;
    loop {
        scan.skip_space();
        if scan.eat(b'}').is_some() {
            return found;
        }
        let Some(key) = scan.string() else {
            return found;
        };
        scan.skip_space();
        if scan.eat(b':').is_none() {
            return found;
        }
        scan.skip_space();
        if key == "transcript" {
            let value = scan.peek() == Some(b'"');
            let text = if value { scan.string() } else { None };
            if value && text.is_none() {
                return found; // cut off inside the value
            }
            found = text;
            if !value && !scan.skip_value() {
                return found;
            }
        } else if !scan.skip_value() {
            return found;
        }
        scan.skip_space();
        if scan.eat(b',').is_none() {
            return found;
        }
    }
}

/// A cursor over the prefix; every step stops (returns `None`/`false`) at its end.
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    /// The end (one past the closing quote) of the string starting at `self.at`.
    fn string_end(&self) -> Option<usize> {
        let mut i = self.at + 1;
        loop {
            match self.bytes.get(i)? {
                b'"' => return Some(i + 1),
                b'\\' => i += 2,
                _ => i += 1,
            }
        }
    }

    /// A whole JSON string, decoded (escapes, UTF-8) by serde_json.
    fn string(&mut self) -> Option<String> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let end = self.string_end()?;
        let text = serde_json::from_slice(self.bytes.get(self.at..end)?).ok()?;
        self.at = end;
        Some(text)
    }

    /// Skips a whole string; false when the prefix ends inside it.
    fn skip_string(&mut self) -> bool {
        match self.string_end() {
            Some(end) => {
                self.at = end;
                true
            }
            None => false,
        }
    }

    /// Skips one value (a string, a number or literal, a nested object or list);
    /// false when the prefix ends inside it.
    fn skip_value(&mut self) -> bool {
        match self.peek() {
            None => false,
            Some(b'"') => self.skip_string(),
            Some(b'{' | b'[') => self.skip_nested(),
            Some(_) => {
                while let Some(b) = self.peek() {
                    if matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace() {
                        return true;
                    }
                    self.at += 1;
                }
                false
            }
        }
    }

    /// Skips an object or list, strings inside it included.
    fn skip_nested(&mut self) -> bool {
        let mut depth = 0usize;
        loop {
            match self.peek() {
                None => return false,
                Some(b'"') => {
                    if !self.skip_string() {
                        return false;
                    }
                }
                Some(b'{' | b'[') => {
                    depth += 1;
                    self.at += 1;
                }
                Some(b'}' | b']') => {
                    depth = depth.saturating_sub(1);
                    self.at += 1;
                    if depth == 0 {
                        return true;
                    }
                }
                Some(_) => self.at += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Option<String> {
        transcript_in_prefix(text.as_bytes())
    }

    #[test]
    fn the_transcript_is_found_after_any_values_before_it() {
        assert_eq!(
            t(r#"{"transcript": "/t.jsonl", "prompt": "#).as_deref(),
            Some("/t.jsonl")
        );
        assert_eq!(
            t(r#" { "id": "a", "n": -1.5e3, "ok": true, "none": null, "hook": {"x": [1, {"transcript": "inner"}], "s": "}]\""}, "list": [[], {}], "transcript" : "T\u00e9\n", "prompt": "very long"#)
                .as_deref(),
            Some("Té\n")
        );
        assert_eq!(
            t(r#"{"prompt": "p", "transcript": "T"}"#).as_deref(),
            Some("T")
        );
        // A repeated key: the last one, as serde_json takes it.
        assert_eq!(
            t(r#"{"transcript": "a", "transcript": "b", "#).as_deref(),
            Some("b")
        );
    }

    #[test]
    fn no_transcript_when_it_is_missing_cut_off_or_not_a_string() {
        for text in [
            "",
            "[",
            r#"["transcript", "x"]"#,
            r#"{"prompt": "a long prompt cut off here"#,
            r#"{"transcript": "/cut/of"#,
            r#"{"transcript": 5, "prompt": "p"}"#,
            r#"{"transcript": null}"#,
            r#"{"hook": {"transcript": "nested only"}, "prompt": "#,
            r#"{"transcript": "\ud800"}"#,
            r#"{"prompt": "p" "transcript": "T"}"#,
            r#"{"transcript" "T"}"#,
        ] {
            assert_eq!(t(text), None, "{text}");
        }
    }

    #[test]
    fn a_later_non_string_transcript_wins_over_an_earlier_string() {
        assert_eq!(
            t(r#"{"transcript": "a", "transcript": 1, "prompt": "#),
            None
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let samples: [&[u8]; 5] = [
            b"{\"",
            b"{\"a\\",
            b"{\"a\":\"\\",
            b"{\"a\": [\"]",
            &[0xff, b'{', 0xfe],
        ];
        for bytes in samples {
            let _ = transcript_in_prefix(bytes);
        }
    }

    mod props {
        use super::super::transcript_in_prefix;
        use proptest::prelude::*;
        use serde_json::{Map, Value};

        fn value() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(Value::from),
                any::<f64>()
                    .prop_filter("finite", |f| f.is_finite())
                    .prop_map(Value::from),
                any::<String>().prop_map(Value::String),
            ];
            leaf.prop_recursive(3, 24, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::vec((any::<String>(), inner), 0..4)
                        .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
                ]
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            #[test]
            fn any_bytes_are_scanned_without_a_panic(
                bytes in prop::collection::vec(
                    prop_oneof![Just(b'"'), Just(b'\\'), Just(b'{'), Just(b'['), Just(b']'),
                        Just(b'}'), Just(b':'), Just(b','), any::<u8>()],
                    0..200,
                ),
            ) {
                let mut with_start = b"{\"transcript\":".to_vec();
                with_start.extend(&bytes);
                let _ = transcript_in_prefix(&bytes);
                let _ = transcript_in_prefix(&with_start);
            }

            /// On a whole job, the scan finds what a full parse finds; on any prefix
            /// of it, nothing else (the transcript, or none).
            #[test]
            fn the_scan_agrees_with_a_full_parse(
                pairs in prop::collection::vec(
                    (prop_oneof![Just("transcript".to_string()), any::<String>()], value()),
                    0..6,
                ),
                pretty in any::<bool>(),
                cut in any::<prop::sample::Index>(),
            ) {
                let obj: Map<String, Value> = pairs.into_iter().collect();
                let text = if pretty {
                    serde_json::to_string_pretty(&obj).unwrap_or_default()
                } else {
                    serde_json::to_string(&obj).unwrap_or_default()
                };
                let full = match obj.get("transcript") {
                    Some(Value::String(t)) => Some(t.clone()),
                    _ => None,
                };
                prop_assert_eq!(transcript_in_prefix(text.as_bytes()), full.clone());
                let prefix = &text.as_bytes()[..cut.index(text.len() + 1)];
                let found = transcript_in_prefix(prefix);
                prop_assert!(found.is_none() || found == full, "{:?} in {:?}", found, prefix);
            }
        }
    }
}
