//! `cachalot bench nfs`'s load generator against a real server over both
//! versions: every row is measured with a positive figure, the table names
//! each target's version and shows the ratio, and the files the rows made
//! are gone afterwards (each connection's file was its own, over v3 through
//! MOUNT and over v4.1 through an OPEN stateid in the pseudo file system).

mod common;

use cachalot_nfs::load::{parse_target, run, LoadOptions, ROWS};
use common::*;

#[test]
fn every_row_runs_over_v3_and_v41_and_leaves_no_file() {
    let env = env("rw=127.0.0.1,no_root_squash");
    let addr = env.addr();
    let targets = [
        parse_target(&format!("v3={addr}/tank/fs")).unwrap(),
        parse_target(&format!("v41={addr}/tank/fs?version=4.1")).unwrap(),
    ];
    let opts = LoadOptions {
        threads: 2,
        seconds: 1,
        stream_bytes: 2 << 20,
        file_bytes: 1 << 20,
        drop_caches: Some("true".into()),
    };
    let table = run(&targets, &opts).unwrap();
    println!("{table}");
    assert!(
        table.contains("| v3 (v3) | v41 (v4.1) | v41 / v3 |"),
        "{table}"
    );
    for (row, unit) in ROWS {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("| {row} | {unit} |")))
            .unwrap_or_else(|| panic!("no row {row}: {table}"));
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | row | unit | v3 | v4.1 | ratio |
        for v in &cells[3..5] {
            let n: f64 = v.parse().unwrap_or_else(|_| panic!("{row}: {v:?}"));
            assert!(n > 0.0, "{row}: {line}");
        }
        assert!(cells[5].ends_with('x'), "{line}");
    }
    let (mut c, root) = env.mounted();
    let names: Vec<String> = c
        .readdir_all(&root, 4096, false)
        .unwrap()
        .into_iter()
        .map(|e| String::from_utf8_lossy(&e.name).into_owned())
        .filter(|n| n != "." && n != "..")
        .collect();
    assert!(names.is_empty(), "left behind: {names:?}");
}
