//! MySQL awareness: what a file under a MySQL/MariaDB data directory is.
//!
//! [`classify`] maps a path within a dataset (e.g. `/sbtest/sbtest1.ibd`) to a
//! [`FileClass`]: its kind (redo, undo, doublewrite, system, table, binlog, relay,
//! other) and, for tablespaces, `schema.table`. It looks only at names, never at
//! contents, so it is cheap enough to run once per file and cache.
//!
//! Invariants:
//! - Pure and total: every path gets a class; unknown names are `other` with table `-`.
//! - Partitions (`t#P#p0.ibd`, `t#p#p0.ibd`) map to their table `schema.t`.
//! - [`is_mysql_marker`] is true only for names InnoDB itself creates, so a dataset
//!   is treated as MySQL (its files classified into `innodb.ops`) only once such a
//!   file has been seen in it.

/// Kind and table of one file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileClass {
    /// One of [`KINDS`].
    pub kind: &'static str,
    /// `schema.table` for tablespaces and table files, else `-`.
    pub table: String,
}

/// Every kind [`classify`] returns.
pub const KINDS: &[&str] = &[
    "redo",
    "undo",
    "doublewrite",
    "system",
    "table",
    "binlog",
    "relay",
    "other",
];

fn split_name(path: &str) -> (&str, &str) {
    let path = path.trim_end_matches('/');
    match path.rsplit_once('/') {
        Some((dir, name)) => (dir.rsplit('/').next().unwrap_or(""), name),
        None => ("", path),
    }
}

/// True if `s` is non-empty and all ASCII digits.
fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `stem.NNNNNN` or `stem.index`: the stem, if `name` looks like a log sequence file.
fn log_sequence_stem(name: &str) -> Option<&str> {
    let (stem, ext) = name.rsplit_once('.')?;
    (digits(ext) || ext == "index").then_some(stem)
}

fn table_of(schema: &str, file_stem: &str) -> String {
    let base = file_stem
        .split_once("#P#")
        .or_else(|| file_stem.split_once("#p#"))
        .map_or(file_stem, |(t, _)| t);
    if schema.is_empty() {
        base.to_string()
    } else {
        format!("{schema}.{base}")
    }
}

/// Classify the file at `path` (a path within the dataset; `/` separated).
pub fn classify(path: &str) -> FileClass {
    let (dir, name) = split_name(path);
    let other = |kind: &'static str| FileClass {
        kind,
        table: "-".to_string(),
    };
    if name.starts_with("ib_logfile") || dir == "#innodb_redo" || name.starts_with("#ib_redo") {
        return other("redo");
    }
    if name.starts_with("undo_")
        || name.ends_with(".ibu")
        || (name.starts_with("undo") && digits(&name[4..]))
    {
        return other("undo");
    }
    if name.starts_with("ib_doublewrite") || name.ends_with(".dblwr") {
        return other("doublewrite");
    }
    if name.starts_with("ibdata") || (dir.is_empty() && name == "mysql.ibd") {
        return other("system");
    }
    if let Some(stem) = name.strip_suffix(".ibd") {
        return FileClass {
            kind: "table",
            table: table_of(dir, stem),
        };
    }
    if name == "relay-log.info" {
        return other("relay");
    }
    if let Some(stem) = log_sequence_stem(name) {
        if stem.contains("relay") {
            return other("relay");
        }
        if stem.ends_with("bin") || stem.ends_with("binlog") {
            return other("binlog");
        }
    }
    for ext in [".frm", ".MYD", ".MYI", ".MAD", ".MAI", ".CSV", ".CSM"] {
        if let Some(stem) = name.strip_suffix(ext) {
            return FileClass {
                kind: "other",
                table: table_of(dir, stem),
            };
        }
    }
    other("other")
}

/// True if `path` names a file only MySQL/MariaDB creates (the dataset holds a
/// MySQL data directory or its logs).
pub fn is_mysql_marker(path: &str) -> bool {
    let (_, name) = split_name(path);
    matches!(
        classify(path).kind,
        "redo" | "undo" | "doublewrite" | "system" | "table"
    ) || name == "aria_log_control"
        || name == "ib_buffer_pool"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(p: &str) -> (&'static str, String) {
        let c = classify(p);
        (c.kind, c.table)
    }

    #[test]
    fn innodb_files() {
        assert_eq!(k("/ib_logfile0").0, "redo");
        assert_eq!(k("/log/ib_logfile1").0, "redo");
        assert_eq!(k("/#innodb_redo/#ib_redo12").0, "redo");
        assert_eq!(k("/undo_001").0, "undo");
        assert_eq!(k("/undo002").0, "undo");
        assert_eq!(k("/undo_003.ibu").0, "undo");
        assert_eq!(k("/#ib_16384_0.dblwr").0, "doublewrite");
        assert_eq!(k("/ib_doublewrite").0, "doublewrite");
        assert_eq!(k("/ibdata1").0, "system");
        assert_eq!(k("/mysql.ibd").0, "system");
        assert_eq!(k("/sbtest/sbtest1.ibd"), ("table", "sbtest.sbtest1".into()));
        assert_eq!(k("/db/t#P#p0.ibd"), ("table", "db.t".into()));
        assert_eq!(k("/db/t#p#p1#sp#s0.ibd"), ("table", "db.t".into()));
        assert_eq!(
            k("/mysql/innodb_table_stats.ibd").1,
            "mysql.innodb_table_stats"
        );
    }

    #[test]
    fn logs_and_others() {
        assert_eq!(k("/binlog.000001").0, "binlog");
        assert_eq!(k("/binlog.index").0, "binlog");
        assert_eq!(k("/mysql-bin.000123").0, "binlog");
        assert_eq!(k("/host-relay-bin.000002").0, "relay");
        assert_eq!(k("/host-relay-bin.index").0, "relay");
        assert_eq!(k("/relay-log.info").0, "relay");
        assert_eq!(k("/db/t.frm"), ("other", "db.t".into()));
        assert_eq!(k("/aria_log.00000001").0, "other");
        assert_eq!(k("/notes.txt"), ("other", "-".into()));
        assert_eq!(k("").0, "other");
        assert_eq!(k("/").0, "other");
        assert_eq!(k("/backup.7").0, "other");
    }

    #[test]
    fn markers() {
        assert!(is_mysql_marker("/ibdata1"));
        assert!(is_mysql_marker("/ib_logfile0"));
        assert!(is_mysql_marker("/aria_log_control"));
        assert!(is_mysql_marker("/x/y.ibd"));
        assert!(!is_mysql_marker("/binlog.000001"));
        assert!(!is_mysql_marker("/data.bin"));
        for kind in ["redo", "table", "other"] {
            assert!(KINDS.contains(&kind));
        }
    }
}
