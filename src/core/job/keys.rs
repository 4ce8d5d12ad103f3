//! The keys of a job object: which are job keys, which are other keys (catstack's
//! hooks add keys of their own), and which look like a misspelt job key
//! (`hit_if_all_ture`), the typo that would otherwise drop a rule and make every
//! answer a hit. Pure: no I/O.

/// Every key the judge reads from a job (docs/reference.md, "Job file"), in the order
/// messages list them.
pub const JOB_KEYS: [&str; 11] = [
    "prompt",
    "id",
    "transcript",
    "hook",
    "mode",
    "timeout_seconds",
    "cwd",
    "hit_if_all_true",
    "hit_if_any_true",
    "on_hit",
    "rule_id",
];

/// A key that is not a job key but is within a small edit distance of one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTypo {
    /// The key as the job spells it.
    pub key: String,
    /// The job key it resembles.
    pub resembles: &'static str,
}

/// The keys of a job object that the judge does not read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnknownKeys {
    /// Keys that look like a misspelt known key, in the object's order.
    pub typos: Vec<KeyTypo>,
    /// Every other unknown key, in the object's order.
    pub others: Vec<String>,
}

/// Sorts the keys of a job object that are not in `known` into likely typos of a
/// `known` key and other keys (passed through silently by the daemon).
pub fn unknown_keys<'a>(
    keys: impl IntoIterator<Item = &'a str>,
    known: &[&'static str],
) -> UnknownKeys {
    let mut found = UnknownKeys::default();
    for key in keys {
        if known.contains(&key) {
            continue;
        }
        match resembles(key, known).or_else(|| rule_like(key, known)) {
            Some(resembles) => found.typos.push(KeyTypo {
                key: key.to_string(),
                resembles,
            }),
            None => found.others.push(key.to_string()),
        }
    }
    found
}

/// The `known` key that `key` most likely misspells, if any.
///
/// Both are compared lowercased without `_`, `-` and spaces (so `Prompt`,
/// `hit-if-all-true` and `hitIfAllTrue` count), by Damerau-Levenshtein distance
/// (optimal string alignment: a swap of two neighbours is one edit). The bound grows
/// with the known key: names of three letters or fewer (`id`, `cwd`) match only that
/// way, since one edit turns them into other words (`uid`, `pid`); names up to six
/// letters allow one edit that keeps the first letter (or swaps the first two), so
/// `mdoe` and `promtp` match but `code` and `book` do not; longer names allow two.
pub fn resembles<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let key = squeeze(key);
    let mut best: Option<(usize, &'k str)> = None;
    for &candidate in known {
        let name = squeeze(candidate);
        let distance = edit_distance(&key, &name);
        let close = match name.len() {
            0..=3 => distance == 0,
            4..=6 => distance <= 1 && (key.first() == name.first() || swaps_first_two(&key, &name)),
            _ => distance <= 2,
        };
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, candidate)| candidate)
}

/// The rule key that `key` looks meant as, when `known` has the rule keys: any key
/// that starts with `hit` (`hit_if_all`, `hit_if_true`, `hit_when_all_true`) or ends
/// in `alltrue` / `anytrue`. Such a key would leave the job with no rule, so every
/// answer would be a hit.
fn rule_like(key: &str, known: &[&'static str]) -> Option<&'static str> {
    let squeezed: String = squeeze(key).into_iter().collect();
    let looks = squeezed.starts_with("hit")
        || squeezed.ends_with("alltrue")
        || squeezed.ends_with("anytrue");
    let meant = match squeezed.contains("any") {
        true => "hit_if_any_true",
        false => "hit_if_all_true",
    };
    known
        .iter()
        .copied()
        .find(|k| *k == meant)
        .filter(|_| looks)
}

/// Lowercase characters with separators removed.
fn squeeze(key: &str) -> Vec<char> {
    key.chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// True when `a` is `b` with its first two characters swapped.
fn swaps_first_two(a: &[char], b: &[char]) -> bool {
    a.len() == b.len() && a.len() >= 2 && a[0] == b[1] && a[1] == b[0] && a[2..] == b[2..]
}

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps
/// of two neighbouring characters each count one.
pub fn edit_distance(a: &[char], b: &[char]) -> usize {
    // Three rows of the classic table: the one two back is needed for swaps.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        current[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (previous[j] + 1)
                .min(current[j - 1] + 1)
                .min(previous[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(before[j - 2] + 1);
            }
            current[j] = best;
        }
        std::mem::swap(&mut before, &mut previous);
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(a: &str, b: &str) -> usize {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        edit_distance(&a, &b)
    }

    #[test]
    fn keys_that_look_like_a_rule_key_are_typos_of_one() {
        let found = unknown_keys(
            [
                "hit_if_all",
                "hit_if_true",
                "hit_when_all_true",
                "hitIfAny",
                "when_any_true",
                "agent_id",
                "history",
            ],
            &JOB_KEYS,
        );
        let typos: Vec<(&str, &str)> = found
            .typos
            .iter()
            .map(|t| (t.key.as_str(), t.resembles))
            .collect();
        assert_eq!(
            typos,
            [
                ("hit_if_all", "hit_if_all_true"),
                ("hit_if_true", "hit_if_all_true"),
                ("hit_when_all_true", "hit_if_all_true"),
                ("hitIfAny", "hit_if_any_true"),
                ("when_any_true", "hit_if_any_true"),
            ]
        );
        assert_eq!(found.others, ["agent_id", "history"]);
        // Where rule keys are not known (another key set), nothing is a rule key.
        assert!(unknown_keys(["hit_if_all"], &["prompt"]).typos.is_empty());
    }

    #[test]
    fn edit_distance_counts_a_swap_as_one_edit() {
        assert_eq!(d("", ""), 0);
        assert_eq!(d("abc", ""), 3);
        assert_eq!(d("", "abc"), 3);
        assert_eq!(d("mode", "mode"), 0);
        assert_eq!(d("mdoe", "mode"), 1);
        assert_eq!(d("true", "ture"), 1);
        assert_eq!(d("kitten", "sitting"), 3);
        assert_eq!(
            d("ca", "abc"),
            3,
            "optimal string alignment, not full Damerau"
        );
        assert_eq!(d("été", "ete"), 2, "characters, not bytes");
    }

    #[test]
    fn the_typos_the_issue_names_are_caught_with_the_key_they_resemble() {
        for (typo, meant) in [
            ("hit_if_all_ture", "hit_if_all_true"),
            ("hit_if_any_tru", "hit_if_any_true"),
            ("promtp", "prompt"),
            ("transcipt", "transcript"),
            ("timeout_second", "timeout_seconds"),
            ("mdoe", "mode"),
            ("Prompt", "prompt"),
            ("ID", "id"),
            ("hit-if-all-true", "hit_if_all_true"),
            ("hitIfAnyTrue", "hit_if_any_true"),
            ("hit_if_all_trues", "hit_if_all_true"),
            ("rule-id", "rule_id"),
            ("onhit", "on_hit"),
            ("hooks", "hook"),
            ("rpompt", "prompt"),
            // A job cannot choose a model; the message points to the key it can set.
            ("model", "mode"),
        ] {
            assert_eq!(resembles(typo, &JOB_KEYS), Some(meant), "{typo}");
        }
    }

    #[test]
    fn catstacks_own_keys_and_common_words_pass() {
        for key in [
            "session_id",
            "harness",
            "created_at",
            "agent_id",
            "isSidechain",
            "is_sidechain",
            "offscope_request",
            "rule_text",
            "transcript_path",
            "expect",
            "extra",
            "uid",
            "pid",
            "code",
            "node",
            "book",
            "timeout",
            "hit_if_all_false",
        ] {
            assert_eq!(resembles(key, &JOB_KEYS), None, "{key}");
        }
    }

    #[test]
    fn unknown_keys_are_sorted_into_typos_and_others_in_order() {
        let keys = ["prompt", "harness", "hit_if_all_ture", "x", "mdoe", "id"];
        let found = unknown_keys(keys, &JOB_KEYS);
        assert_eq!(
            found.typos,
            [
                KeyTypo {
                    key: "hit_if_all_ture".into(),
                    resembles: "hit_if_all_true"
                },
                KeyTypo {
                    key: "mdoe".into(),
                    resembles: "mode"
                }
            ]
        );
        assert_eq!(found.others, ["harness", "x"]);
        assert_eq!(unknown_keys(JOB_KEYS, &JOB_KEYS), UnknownKeys::default());
    }

    #[test]
    fn the_closest_known_key_wins() {
        // One edit from hit_if_all_true, three from hit_if_any_true.
        assert_eq!(
            resembles("hit_if_al_true", &JOB_KEYS),
            Some("hit_if_all_true")
        );
        assert_eq!(
            resembles("hit_if_an_true", &JOB_KEYS),
            Some("hit_if_any_true")
        );
        assert_eq!(resembles("expct", &["expect"]), Some("expect"));
    }
}
