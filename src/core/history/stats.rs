//! `llm-judge stats`: per rule (and per day, week or session with `--by`), how often it
//! judged and hit, what the hooks did with its hits, how long the judge and the stops
//! took, what it cost, and how its marked verdicts were labelled.

use serde_json::{Value, json};

use super::listing::{NOTICE_PENDING, Row, fit, seconds};
use super::record::Decision;

/// A rule's figures over a set of verdicts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleStats {
    /// The day, week or session with `--by`; empty without.
    pub group: String,
    pub rule: String,
    pub judged: u64,
    pub hits: u64,
    pub unchecked: u64,
    pub blocks: u64,
    pub notices_delivered: u64,
    pub notices_pending: u64,
    judge_ms: Vec<u64>,
    stop_ms: Vec<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: Option<f64>,
    pub marked_right: u64,
    pub marked_wrong: u64,
}

/// The name of the figures of verdicts with no rule.
pub const NO_RULE: &str = "(no rule)";

impl RuleStats {
    fn add(&mut self, row: &Row) {
        self.judged += 1;
        match row.outcome.as_str() {
            "hit" => self.hits += 1,
            "unchecked" => self.unchecked += 1,
            _ => {}
        }
        match (row.decision, row.action()) {
            (Some(Decision::Blocked | Decision::Rewoke), _) => self.blocks += 1,
            (Some(Decision::NoticeDelivered), _) => self.notices_delivered += 1,
            (_, NOTICE_PENDING) => self.notices_pending += 1,
            _ => {}
        }
        self.judge_ms.push(row.judge_ms);
        self.stop_ms.extend(row.stop_ms);
        self.input_tokens += row.input_tokens.unwrap_or(0);
        self.output_tokens += row.output_tokens.unwrap_or(0);
        if let Some(cost) = row.cost_usd {
            self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost);
        }
        match row.mark.as_deref() {
            Some("right") => self.marked_right += 1,
            Some("wrong") => self.marked_wrong += 1,
            _ => {}
        }
    }

    /// Hits over answered verdicts (`None` when none was answered).
    pub fn hit_rate(&self) -> Option<f64> {
        let answered = self.judged - self.unchecked;
        (answered > 0).then(|| self.hits as f64 / answered as f64)
    }

    /// The judge's latency at `p` (0-100), in ms.
    pub fn judge_ms_at(&self, p: u32) -> Option<u64> {
        percentile(&self.judge_ms, p)
    }

    /// The hook stops' wall time at `p` (0-100), in ms.
    pub fn stop_ms_at(&self, p: u32) -> Option<u64> {
        percentile(&self.stop_ms, p)
    }

    /// The figures as one JSON object (`stats --json`).
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "rule": self.rule,
            "judged": self.judged,
            "hits": self.hits,
            "hit_rate": self.hit_rate(),
            "blocks": self.blocks,
            "notices_delivered": self.notices_delivered,
            "notices_pending": self.notices_pending,
            "unchecked": self.unchecked,
            "judge_ms_p50": self.judge_ms_at(50),
            "judge_ms_p95": self.judge_ms_at(95),
            "stop_ms_p50": self.stop_ms_at(50),
            "stop_ms_p95": self.stop_ms_at(95),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "marked_right": self.marked_right,
            "marked_wrong": self.marked_wrong,
        });
        if !self.group.is_empty()
            && let Some(map) = v.as_object_mut()
        {
            map.insert("group".into(), json!(self.group));
        }
        v
    }
}

/// The figures of `rows` (each with its group: `""` without `--by`), per group then
/// rule, groups in the order first seen and rules by name.
pub fn aggregate(rows: &[(String, Row)]) -> Vec<RuleStats> {
    let mut stats: Vec<RuleStats> = Vec::new();
    let mut at: std::collections::HashMap<(&str, &str), usize> = std::collections::HashMap::new();
    // Groups in the order first seen.
    let mut order: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (group, row) in rows {
        let rule = row.rule.as_deref().unwrap_or(NO_RULE);
        let i = *at.entry((group.as_str(), rule)).or_insert_with(|| {
            stats.push(RuleStats {
                group: group.clone(),
                rule: rule.to_string(),
                ..RuleStats::default()
            });
            stats.len() - 1
        });
        let next = order.len();
        order.entry(group.as_str()).or_insert(next);
        stats[i].add(row);
    }
    stats.sort_by(|a, b| {
        let rank = |s: &RuleStats| order.get(s.group.as_str()).copied();
        rank(a).cmp(&rank(b)).then_with(|| a.rule.cmp(&b.rule))
    });
    stats
}

/// Nearest-rank percentile `p` (0-100) of `values`.
pub fn percentile(values: &[u64], p: u32) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = (u64::from(p.min(100)) * sorted.len() as u64)
        .div_ceil(100)
        .max(1);
    sorted.get(rank as usize - 1).copied()
}

/// The table of `stats` (fits 100 columns); a group's rules under its name.
pub fn render_table(stats: &[RuleStats]) -> String {
    let mut out = format!(
        "{:<14} {:>6} {:>5} {:>5} {:>6} {:>7} {:>5} {:>11} {:>11} {:>7} {:>7} {:>5}\n",
        "RULE",
        "JUDGED",
        "HITS",
        "RATE",
        "BLOCKS",
        "NOTICES",
        "UNCHK",
        "JUDGE 50/95",
        "STOP 50/95",
        "TOKENS",
        "COST",
        "R/W"
    );
    let mut group = None;
    for s in stats {
        if !s.group.is_empty() && group != Some(&s.group) {
            out.push_str(&format!("{}\n", fit(&s.group, 100)));
            group = Some(&s.group);
        }
        let pair = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => format!("{}/{}", seconds(a), seconds(b)),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{:<14} {:>6} {:>5} {:>5} {:>6} {:>7} {:>5} {:>11} {:>11} {:>7} {:>7} {:>5}\n",
            fit(&s.rule, 14),
            s.judged,
            s.hits,
            s.hit_rate()
                .map_or("-".into(), |r| format!("{:.0}%", r * 100.0)),
            s.blocks,
            format!("{}/{}", s.notices_delivered, s.notices_pending),
            s.unchecked,
            pair(s.judge_ms_at(50), s.judge_ms_at(95)),
            pair(s.stop_ms_at(50), s.stop_ms_at(95)),
            tokens(s.input_tokens + s.output_tokens),
            s.cost_usd.map_or("-".into(), cost),
            format!("{}/{}", s.marked_right, s.marked_wrong),
        ));
    }
    out.push_str("NOTICES: delivered/pending; R/W: verdicts marked right/wrong (llm-judge mark)\n");
    out
}

/// Dollars: cents under $100, whole dollars above.
fn cost(usd: f64) -> String {
    match usd < 100.0 {
        true => format!("${usd:.2}"),
        false => format!("${usd:.0}"),
    }
}

/// A token count at a glance: `950`, `12.3k`, `4.1M`.
fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rule: &str, outcome: &str, judge_ms: u64) -> Row {
        Row {
            rule: Some(rule.into()),
            outcome: outcome.into(),
            judge_ms,
            rule_action: Some("notice".into()),
            ..Row::default()
        }
    }

    #[test]
    fn a_rules_figures() {
        let mut blocked = row("tests", "hit", 3_000);
        blocked.decision = Some(Decision::Blocked);
        blocked.stop_ms = Some(3_100);
        blocked.mark = Some("right".into());
        blocked.input_tokens = Some(1_000);
        blocked.output_tokens = Some(200);
        blocked.cost_usd = Some(0.5);
        let mut delivered = row("tests", "hit", 1_000);
        delivered.decision = Some(Decision::NoticeDelivered);
        let pending = row("tests", "hit", 2_000);
        let mut clean = row("tests", "clean", 4_000);
        clean.mark = Some("wrong".into());
        let unchecked = row("tests", "unchecked", 10);
        let rows: Vec<(String, Row)> = [
            blocked,
            delivered,
            pending,
            clean,
            unchecked,
            row("other", "clean", 1),
        ]
        .into_iter()
        .map(|r| (String::new(), r))
        .collect();
        let stats = aggregate(&rows);
        assert_eq!(
            stats.iter().map(|s| s.rule.as_str()).collect::<Vec<_>>(),
            ["other", "tests"]
        );
        let t = &stats[1];
        assert_eq!((t.judged, t.hits, t.unchecked, t.blocks), (5, 3, 1, 1));
        assert_eq!((t.notices_delivered, t.notices_pending), (1, 1));
        assert_eq!(t.hit_rate(), Some(0.75));
        assert_eq!(
            (t.judge_ms_at(50), t.judge_ms_at(95)),
            (Some(2_000), Some(4_000))
        );
        assert_eq!(
            (t.stop_ms_at(50), t.cost_usd, t.marked_right, t.marked_wrong),
            (Some(3_100), Some(0.5), 1, 1)
        );
        let json = t.to_json();
        assert_eq!(json["notices_pending"], 1);
        assert!(json.get("group").is_none());
    }

    #[test]
    fn groups_keep_their_order_and_name_their_rows() {
        let rows = vec![
            ("2026-12-06".to_string(), row("b", "clean", 1)),
            ("2026-12-07".to_string(), row("a", "hit", 1)),
            ("2026-12-06".to_string(), row("a", "clean", 1)),
        ];
        let stats = aggregate(&rows);
        let keys: Vec<(&str, &str)> = stats
            .iter()
            .map(|s| (s.group.as_str(), s.rule.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("2026-12-06", "a"),
                ("2026-12-06", "b"),
                ("2026-12-07", "a")
            ]
        );
        assert_eq!(stats[0].to_json()["group"], "2026-12-06");
        let table = render_table(&stats);
        for line in table.lines() {
            assert!(line.chars().count() <= 100, "{line:?}");
        }
        assert!(table.contains("2026-12-07\na "), "{table}");
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[7], 95), Some(7));
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(
            (percentile(&hundred, 50), percentile(&hundred, 95)),
            (Some(50), Some(95))
        );
        assert_eq!(percentile(&[5, 1, 3], 0), Some(1));
    }

    #[test]
    fn an_unanswered_rule_has_no_rate() {
        let stats = aggregate(&[(String::new(), row("r", "unchecked", 1))]);
        assert_eq!(stats[0].hit_rate(), None);
        assert!(render_table(&stats).contains(" - "));
    }

    #[test]
    fn a_wide_row_still_fits() {
        let mut r = row("a-rule-with-a-long-name", "hit", 123_456);
        r.stop_ms = Some(99_999);
        r.input_tokens = Some(123_456_789);
        r.cost_usd = Some(1234.5);
        let table = render_table(&aggregate(&[(String::new(), r)]));
        for line in table.lines() {
            assert!(
                line.chars().count() <= 100,
                "{line:?} is {}",
                line.chars().count()
            );
        }
    }
}
