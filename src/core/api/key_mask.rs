//! An API key masked out of what a server sent back (docs/api-runners.md, "Keys"): a
//! response that repeats the key, even JSON-escaped (`\/`, `\uXXXX`), must not carry it
//! into a reason, a verdict, judge.log or health.json. The key is looked for in the
//! decoded text (every string of a JSON body, the reply, the answer), never in JSON's
//! own syntax, so masking cannot change a number, a key or `true`.

use serde_json::{Map, Value};

/// What stands in for the key.
pub const KEY_MASK: &str = "[api key]";

/// Keys shorter than this are not masked: a real API key is far longer, and masking a
/// short one (`k`, `true`) would rewrite ordinary words of a reply or an answer.
pub const MIN_MASKED_KEY_CHARS: usize = 16;

/// The key when it is long enough to be masked.
fn maskable(key: Option<&str>) -> Option<&str> {
    key.filter(|k| k.chars().count() >= MIN_MASKED_KEY_CHARS)
}

/// `text` with every occurrence of `key` replaced by [`KEY_MASK`].
pub fn mask_text(text: &str, key: Option<&str>) -> String {
    match maskable(key) {
        Some(key) if text.contains(key) => text.replace(key, KEY_MASK),
        _ => text.to_string(),
    }
}

/// A response body with `key` masked: inside every string once decoded when it is
/// JSON (written back as JSON), else in its raw bytes.
pub fn mask_body(body: &[u8], key: Option<&str>) -> Vec<u8> {
    let Some(key) = maskable(key) else {
        return body.to_vec();
    };
    match serde_json::from_slice::<Value>(body) {
        Ok(mut value) => match mask_value(&mut value, key) {
            true => serde_json::to_vec(&value).unwrap_or_else(|_| body.to_vec()),
            false => body.to_vec(),
        },
        Err(_) => mask_text(&String::from_utf8_lossy(body), Some(key)).into_bytes(),
    }
}

/// Masks `key` in every string of `object` (names and values); true when one changed.
pub fn mask_object(object: &mut Map<String, Value>, key: Option<&str>) -> bool {
    let Some(key) = maskable(key) else {
        return false;
    };
    let mut value = Value::Object(std::mem::take(object));
    let changed = mask_value(&mut value, key);
    if let Value::Object(masked) = value {
        *object = masked;
    }
    changed
}

fn mask_value(value: &mut Value, key: &str) -> bool {
    match value {
        Value::String(s) if s.contains(key) => {
            *s = s.replace(key, KEY_MASK);
            true
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |changed, v| mask_value(v, key) | changed),
        Value::Object(object) if object.keys().any(|k| k.contains(key)) => {
            let masked = std::mem::take(object)
                .into_iter()
                .map(|(k, mut v)| {
                    mask_value(&mut v, key);
                    (k.replace(key, KEY_MASK), v)
                })
                .collect();
            *object = masked;
            true
        }
        Value::Object(object) => object
            .values_mut()
            .fold(false, |changed, v| mask_value(v, key) | changed),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "sk-test/7f3a9c1e-0123";

    #[test]
    fn the_key_is_masked_in_decoded_strings_also_when_escaped() {
        let escaped = r#"{"error": {"message": "bad key sk-test\/7f3a9c1e-\u0030123"}}"#;
        let masked: Value =
            serde_json::from_slice(&mask_body(escaped.as_bytes(), Some(KEY))).expect("JSON");
        assert_eq!(masked["error"]["message"], "bad key [api key]");
        let raw = format!("<html>bad key {KEY}</html>");
        assert_eq!(
            mask_body(raw.as_bytes(), Some(KEY)),
            b"<html>bad key [api key]</html>"
        );
        let mut answer = json!({"note": KEY, KEY: [KEY]});
        let Value::Object(object) = &mut answer else {
            unreachable!()
        };
        assert!(mask_object(object, Some(KEY)));
        assert_eq!(
            answer,
            json!({"note": "[api key]", "[api key]": ["[api key]"]})
        );
    }

    #[test]
    fn a_short_key_and_json_syntax_are_left_alone() {
        let body = br#"{"usage": {"input_tokens": 10}, "ok": true, "text": "ok"}"#;
        assert_eq!(mask_body(body, Some("k")), body);
        assert_eq!(mask_body(body, Some("true")), body);
        // A long key that happens to be a JSON word still only matches inside strings.
        let word = "1".repeat(MIN_MASKED_KEY_CHARS);
        let numeric = format!(r#"{{"n": {word}, "s": "{word}"}}"#);
        let masked: Value =
            serde_json::from_slice(&mask_body(numeric.as_bytes(), Some(&word))).expect("JSON");
        assert_eq!(masked["s"], KEY_MASK);
        assert!(masked["n"].is_number(), "{masked}");
        assert_eq!(mask_text("a k b", Some("k")), "a k b");
        assert_eq!(mask_body(body, None), body);
    }
}
