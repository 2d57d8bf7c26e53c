//! Retention grids, as zrepl's: `1h:every 5m, 1d:every 1h, 30d:every 1d` keeps,
//! among a relationship's snapshots younger than an hour, one per 5-minute
//! interval; younger than a day, one per hour; younger than 30 days, one per
//! day; and none older.
//!
//! Invariants of [`prune`]: the newest snapshot is always kept; in each
//! interval the oldest snapshot is the one kept, so a snapshot once kept stays
//! kept until it ages out of its rule (intervals are aligned to the epoch, not
//! to "now"); an empty grid keeps everything. Holds are not this module's
//! business: the caller skips held snapshots (the newest common one is held).

/// One rule: snapshots younger than `within` seconds, one per `every` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub within: u64,
    pub every: u64,
}

/// Parse `DURATION:every DURATION, ...` (durations as `30s`, `5m`, `2h`, `7d`,
/// `2w`); the rules come back sorted by `within`.
pub fn parse_keep(s: &str) -> Result<Vec<Rule>, String> {
    let mut rules = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || {
            format!("invalid retention rule '{part}' (use e.g. '1h:every 5m, 1d:every 1h, 30d:every 1d')")
        };
        let (within, every) = part.split_once(':').ok_or_else(bad)?;
        let every = every.trim().strip_prefix("every").ok_or_else(bad)?;
        let within = duration(within).ok_or_else(bad)?;
        let every = duration(every).ok_or_else(bad)?;
        if every == 0 || within == 0 || every > within {
            return Err(format!(
                "invalid retention rule '{part}': the interval must be non-zero and at most the period"
            ));
        }
        rules.push(Rule { within, every });
    }
    if rules.len() > 32 {
        return Err("at most 32 retention rules".into());
    }
    rules.sort_by_key(|r| r.within);
    Ok(rules)
}

/// `5m` etc. as seconds.
pub fn duration(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 's') => (&s[..i], 1),
        (i, 'm') => (&s[..i], 60),
        (i, 'h') => (&s[..i], 3600),
        (i, 'd') => (&s[..i], 86_400),
        (i, 'w') => (&s[..i], 7 * 86_400),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// The snapshots of `snaps` (name, creation in unix seconds) that the grid
/// drops at time `now`.
pub fn prune(snaps: &[(String, u64)], now: u64, rules: &[Rule]) -> Vec<String> {
    if rules.is_empty() || snaps.is_empty() {
        return Vec::new();
    }
    let mut sorted: Vec<&(String, u64)> = snaps.iter().collect();
    sorted.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    let newest = sorted.len() - 1;
    let mut seen = std::collections::BTreeSet::new();
    let mut drop = Vec::new();
    for (i, (name, t)) in sorted.into_iter().enumerate() {
        if i == newest {
            continue;
        }
        let age = now.saturating_sub(*t);
        let Some((ri, r)) = rules.iter().enumerate().find(|(_, r)| age < r.within) else {
            drop.push(name.clone());
            continue;
        };
        // Sorted oldest first: the first snapshot of an interval is its keeper.
        if !seen.insert((ri, t / r.every)) {
            drop.push(name.clone());
        }
    }
    drop
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snaps(times: &[u64]) -> Vec<(String, u64)> {
        times.iter().map(|t| (format!("s{t}"), *t)).collect()
    }

    #[test]
    fn parses_the_grid_and_refuses_nonsense() {
        let r = parse_keep("1d:every 1h, 1h:every 5m ,30d:every 1d").unwrap();
        assert_eq!(
            r,
            vec![
                Rule {
                    within: 3600,
                    every: 300
                },
                Rule {
                    within: 86_400,
                    every: 3600
                },
                Rule {
                    within: 30 * 86_400,
                    every: 86_400
                },
            ]
        );
        assert_eq!(parse_keep("").unwrap(), vec![]);
        for bad in [
            "1h",
            "1h:5m",
            "1h:every",
            "x:every 5m",
            "5m:every 1h",
            "1h:every 0s",
        ] {
            assert!(parse_keep(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keeps_one_per_interval_the_newest_and_nothing_too_old() {
        let rules = parse_keep("60s:every 10s, 300s:every 60s").unwrap();
        let now = 1_000_000;
        // Every 2 s for the last 400 s.
        let times: Vec<u64> = (0..200).map(|i| now - 400 + i * 2).collect();
        let all = snaps(&times);
        let dropped = prune(&all, now, &rules);
        let kept: Vec<u64> = times
            .iter()
            .copied()
            .filter(|t| !dropped.contains(&format!("s{t}")))
            .collect();
        // Nothing at or beyond 300 s; one per 60 s interval in [60, 300); one per
        // 10 s interval under 60 s; the newest.
        assert!(kept.iter().all(|t| now - t < 300));
        let newest = *times.last().unwrap();
        for &t in kept.iter().filter(|&&t| t != newest) {
            let age = now - t;
            let (every, r) = if age < 60 { (10, 0) } else { (60, 1) };
            let same: Vec<_> = kept
                .iter()
                .filter(|&&u| u != newest)
                .filter(|&&u| {
                    let a = now - u;
                    let ru = if a < 60 { 0 } else { 1 };
                    ru == r && u / every == t / every
                })
                .collect();
            assert_eq!(same.len(), 1, "{t}: {same:?}");
        }
        assert!(kept.contains(times.last().unwrap()));
        // Stable: pruning what was kept, a little later, drops nothing new
        // except what aged out of its rule.
        let again = prune(&snaps(&kept), now, &rules);
        assert!(again.is_empty(), "{again:?}");
    }

    #[test]
    fn empty_grid_keeps_everything_and_newest_survives_any_age() {
        assert!(prune(&snaps(&[1, 2, 3]), 10, &[]).is_empty());
        let rules = parse_keep("10s:every 5s").unwrap();
        assert_eq!(prune(&snaps(&[1, 2, 3]), 1000, &rules), vec!["s1", "s2"]);
    }
}
