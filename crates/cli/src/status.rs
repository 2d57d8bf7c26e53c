//! zpool-style rendering of `pool status` and of the importable-pool listing.
//!
//! Invariants: rendering is total over any JSON (missing fields print as "-" or 0);
//! the device tree is indented two spaces per level below the pool row.

use crate::table::{format_date, format_duration_ms};
use cachalot_daemon::format_size;
use serde_json::Value;

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("-")
}

/// The `scan:` line(s) of a scrub status.
pub fn scan_line(sc: &Value) -> String {
    if s(sc, "kind") == "resilver" {
        return resilver_line(sc);
    }
    match s(sc, "state") {
        "scanning" => {
            let total = u(sc, "total");
            let ex = u(sc, "examined");
            let pct = if total == 0 {
                0.0
            } else {
                (ex as f64 * 100.0 / total as f64).min(100.0)
            };
            format!(
                "  scan: scrub in progress, {pct:.1}% done\n\t{} examined of {}, started {}\n",
                format_size(ex),
                format_size(total),
                format_date(u(sc, "started"))
            )
        }
        "finished" => format!(
            "  scan: scrub repaired {} in {} with {} errors on {}\n",
            match u(sc, "repaired") {
                0 => "0B".to_string(),
                1 => "1 block".to_string(),
                n => format!("{n} blocks"),
            },
            format_duration_ms(u(sc, "duration_ms")),
            u(sc, "unrecoverable"),
            format_date(u(sc, "ended"))
        ),
        "canceled" => format!(
            "  scan: scrub canceled on {}\n",
            format_date(u(sc, "ended"))
        ),
        _ => "  scan: none requested\n".to_string(),
    }
}

/// The `scan:` line(s) of a resilver: progress, rate and time left.
fn resilver_line(sc: &Value) -> String {
    let total = u(sc, "total");
    let ex = u(sc, "examined");
    // After `pool online`: only what was written while the device was away.
    let since = match u(sc, "min_birth_txg") {
        0 => String::new(),
        t => format!(", blocks born since txg {t}"),
    };
    match s(sc, "state") {
        "scanning" => {
            let pct = (ex as f64 * 100.0 / total.max(1) as f64).min(100.0);
            // The daemon computes both (a resumed resilver's rate counts only
            // what this run did); 0 s to go means not known yet.
            let (rate, eta) = (u(sc, "rate"), u(sc, "eta_secs"));
            let resumed = match u(sc, "resumed") {
                0 => String::new(),
                r => format!(", resumed at {}", format_size(r)),
            };
            format!(
                "  scan: resilver in progress, {pct:.1}% done, {}/s, {} to go\n\t{} examined of {}{since}, started {}{resumed}\n",
                format_size(rate),
                format_duration_ms(eta * 1000),
                format_size(ex),
                format_size(total),
                format_date(u(sc, "started"))
            )
        }
        "finished" => format!(
            "  scan: resilvered {} columns ({} examined{since}) in {} with {} errors on {}\n",
            u(sc, "resilvered"),
            format_size(ex),
            format_duration_ms(u(sc, "duration_ms")),
            u(sc, "unrecoverable"),
            format_date(u(sc, "ended"))
        ),
        _ => format!(
            "  scan: resilver canceled on {} (it continues on import)\n",
            format_date(u(sc, "ended"))
        ),
    }
}

fn collect_rows(dev: &Value, depth: usize, out: &mut Vec<(String, Value)>) {
    out.push((
        format!("{}{}", "  ".repeat(depth), s(dev, "name")),
        dev.clone(),
    ));
    for c in dev["children"].as_array().into_iter().flatten() {
        collect_rows(c, depth + 1, out);
    }
}

fn render_one(p: &Value) -> String {
    let mut o = String::new();
    let health = s(p, "health");
    o.push_str(&format!("  pool: {}\n", s(p, "name")));
    o.push_str(&format!(" state: {health}\n"));
    if let Some(e) = p["error"].as_str() {
        o.push_str(&format!("status: The pool could not be imported: {e}\n"));
    }
    if let Some(why) = p["suspended"].as_str() {
        o.push_str(&format!("status: The pool is suspended: {why}\n"));
    }
    // Events the operator must know about (intent log replayed or lost...).
    for n in p["notices"].as_array().into_iter().flatten() {
        if let Some(n) = n.as_str() {
            o.push_str(&format!("notice: {n}\n"));
        }
    }
    o.push_str(&scan_line(&p["scrub"]));
    o.push_str("config:\n\n");
    // The pool row carries the sums of its top-level vdevs; log devices follow
    // under "logs", as in zpool status.
    let all: Vec<Value> = p["devices"].as_array().cloned().unwrap_or_default();
    let (spares, all): (Vec<Value>, Vec<Value>) = all
        .into_iter()
        .partition(|d| d["spare"].as_bool() == Some(true));
    let (cache, all): (Vec<Value>, Vec<Value>) =
        all.into_iter().partition(|d| d["cache"].is_object());
    let (logs, devs): (Vec<Value>, Vec<Value>) = all
        .into_iter()
        .partition(|d| d["log"].as_bool() == Some(true));
    let sum = |k: &str| devs.iter().map(|d| u(d, k)).sum::<u64>();
    let mut rows: Vec<(String, Value)> = vec![(
        s(p, "name").to_string(),
        serde_json::json!({"state": health, "read": sum("read"), "write": sum("write"), "cksum": sum("cksum")}),
    )];
    for d in &devs {
        collect_rows(d, 1, &mut rows);
    }
    if !logs.is_empty() {
        rows.push((
            "logs".to_string(),
            serde_json::json!({"state": "", "read": "", "write": "", "cksum": ""}),
        ));
        for d in &logs {
            collect_rows(d, 1, &mut rows);
        }
    }
    // Hot spares not in use, under "spares" (AVAIL, no counters).
    if !spares.is_empty() {
        rows.push((
            "spares".to_string(),
            serde_json::json!({"state": "", "read": "", "write": "", "cksum": ""}),
        ));
        for d in &spares {
            rows.push((
                format!("  {}", s(d, "name")),
                serde_json::json!({"state": s(d, "state"), "read": "-"}),
            ));
        }
    }
    // Cache devices (L2ARC) under "cache": counters, then size, use and hits.
    if !cache.is_empty() {
        rows.push((
            "cache".to_string(),
            serde_json::json!({"state": "", "read": "", "write": "", "cksum": ""}),
        ));
        for d in &cache {
            collect_rows(d, 1, &mut rows);
        }
    }
    let w = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    // RESILVERING is wider than the usual states.
    let sw = rows
        .iter()
        .map(|(_, d)| s(d, "state").len())
        .max()
        .unwrap_or(0)
        .max(8);
    o.push_str(&format!(
        "\t{:<w$}  {:<sw$} {:>5} {:>5} {:>5}\n",
        "NAME", "STATE", "READ", "WRITE", "CKSUM"
    ));
    for (name, d) in &rows {
        if d["read"] == "" {
            // A section heading ("logs", "spares").
            o.push_str(&format!("\t{name}\n"));
            continue;
        }
        if d["read"] == "-" {
            // A spare: a state, no counters.
            o.push_str(&format!("\t{name:<w$}  {}\n", s(d, "state")));
            continue;
        }
        o.push_str(&format!(
            "\t{name:<w$}  {:<sw$} {:>5} {:>5} {:>5}",
            s(d, "state"),
            u(d, "read"),
            u(d, "write"),
            u(d, "cksum")
        ));
        let c = &d["cache"];
        if c.is_object() {
            o.push_str(&format!(
                "  size {} used {} hits {} misses {}",
                format_size(u(c, "size")),
                format_size(u(c, "used")),
                u(c, "hits"),
                u(c, "misses")
            ));
        }
        o.push('\n');
    }
    o.push('\n');
    let errs = u(&p["scrub"], "unrecoverable");
    if errs == 0 {
        o.push_str("errors: No known data errors\n");
    } else {
        o.push_str(&format!("errors: {errs} data errors\n"));
    }
    o
}

/// The whole `pool status` output for a list of pool statuses.
pub fn render_status(st: &Value) -> String {
    let pools: Vec<&Value> = st.as_array().into_iter().flatten().collect();
    if pools.is_empty() {
        return "no pools available\n".to_string();
    }
    pools
        .iter()
        .map(|p| render_one(p))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `pool import` without a name: the pools found.
pub fn render_importable(found: &Value) -> String {
    let mut blocks = Vec::new();
    for p in found.as_array().into_iter().flatten() {
        let state = s(p, "state");
        let mut o = String::new();
        o.push_str(&format!("   pool: {}\n", s(p, "name")));
        o.push_str(&format!("     id: {}\n", p["guid"]));
        o.push_str(&format!("  state: {state}\n"));
        if state == "ONLINE" {
            o.push_str(" action: The pool can be imported using its name or numeric identifier.\n");
        } else {
            o.push_str(" action: The pool cannot be imported: devices are missing.\n");
        }
        o.push_str(" config:\n\n");
        let mut rows: Vec<(String, &str)> = vec![(s(p, "name").to_string(), state)];
        for d in p["devices"].as_array().into_iter().flatten() {
            rows.push((format!("  {}", d.as_str().unwrap_or("-")), "ONLINE"));
        }
        for d in p["missing"].as_array().into_iter().flatten() {
            rows.push((format!("  {}", d.as_str().unwrap_or("-")), "UNAVAIL"));
        }
        let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(10);
        for (n, st) in rows {
            o.push_str(&format!("\t{n:<w$}  {st}\n"));
        }
        blocks.push(o);
    }
    blocks.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_tree() {
        let st = json!([{
            "name": "tank", "health": "ONLINE",
            "space": {"size": 1, "allocated": 0, "free": 1, "frag": 0},
            "devices": [
                {"name": "/tmp/a", "state": "ONLINE", "read": 0, "write": 0, "cksum": 2, "children": []},
                {"name": "mirror-1", "state": "ONLINE", "read": 1, "write": 0, "cksum": 0, "children": [
                    {"name": "/tmp/b", "state": "ONLINE", "read": 1, "write": 0, "cksum": 0, "children": []},
                    {"name": "/tmp/c", "state": "ONLINE", "read": 0, "write": 0, "cksum": 0, "children": []}
                ]}
            ],
            "scrub": {"state": "none"}, "txg": 5, "suspended": null
        }]);
        let out = render_status(&st);
        let expect = "  pool: tank
 state: ONLINE
  scan: none requested
config:

\tNAME        STATE     READ WRITE CKSUM
\ttank        ONLINE       1     0     2
\t  /tmp/a    ONLINE       0     0     2
\t  mirror-1  ONLINE       1     0     0
\t    /tmp/b  ONLINE       1     0     0
\t    /tmp/c  ONLINE       0     0     0

errors: No known data errors
";
        assert_eq!(out, expect);
    }

    #[test]
    fn scan_lines() {
        assert!(
            scan_line(&json!({"state": "scanning", "examined": 452, "total": 1000}))
                .starts_with("  scan: scrub in progress, 45.2% done\n")
        );
        let f = scan_line(&json!({"state": "finished", "repaired": 0, "errors": 0,
                                  "duration_ms": 1200, "ended": 0}));
        assert!(
            f.starts_with("  scan: scrub repaired 0B in 00:00:01 with 0 errors on "),
            "{f}"
        );
        assert_eq!(scan_line(&json!({})), "  scan: none requested\n");
        let r = scan_line(&json!({"kind": "resilver", "state": "scanning",
                                  "examined": 300 << 20, "total": 1000 << 20,
                                  "rate": 10 << 20, "eta_secs": 70, "resumed": 100 << 20}));
        assert!(
            r.starts_with("  scan: resilver in progress, 30.0% done, 10M/s, 00:01:10 to go\n"),
            "{r}"
        );
        assert!(r.contains(", resumed at 100M"), "{r}");
    }

    #[test]
    fn junk_renders() {
        assert_eq!(render_status(&json!(null)), "no pools available\n");
        let out = render_status(&json!([{}]));
        assert!(out.contains("errors: No known data errors"));
        assert!(render_importable(&json!([{}])).contains("pool: -"));
    }
}
