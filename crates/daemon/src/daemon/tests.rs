//! Tests of the daemon core: refusals change nothing, pool and dataset life
//! cycles, read-only ops, dataset types and ordering.

use super::datasets::{parse_types, tree_key};
use super::*;
use crate::pattern;

fn test_daemon(tag: &str) -> (Daemon, PathBuf) {
    let d = std::env::temp_dir().join(format!("cachalot-daemon-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    (Daemon::open(&d, 64 << 20).unwrap(), d)
}

fn call(d: &Daemon, op: &str, args: Value) -> Result<Value, String> {
    d.handle(&Request::new(op, args)).into_result()
}

#[test]
fn rejects_bad_requests_without_touching_anything() {
    let (d, home) = test_daemon("validate");
    for (op, args) in [
        ("nope", json!({})),
        ("pool.list", json!({"bogus": 1})),
        ("pool.list", json!([1, 2])),
        ("pool.list", json!({"name": 5})),
        ("pool.create", json!({"name": "tank"})),
        ("pool.create", json!({"name": "1bad", "vdevs": ["/tmp/x"]})),
        (
            "pool.create",
            json!({"name": "mirror", "vdevs": ["/tmp/x"]}),
        ),
        (
            "pool.create",
            json!({"name": "tank", "vdevs": ["rel.img"], "size": "64M"}),
        ),
        (
            "pool.create",
            json!({"name": "tank", "vdevs": ["/tmp/x"], "ashift": 40}),
        ),
        (
            "pool.create",
            json!({"name": "tank", "vdevs": ["/tmp/x"], "size": "lots"}),
        ),
        ("pool.import", json!({})),
        ("pool.import", json!({"dirs": ["relative"]})),
        ("pool.export", json!({"name": "tank"})),
        ("pool.status", json!({"name": "tank"})),
        ("ds.create", json!({"name": "tank/a b"})),
        ("ds.create", json!({"name": "tank/x"})),
        ("ds.create", json!({"name": "tank"})),
        ("ds.list", json!({"type": "bogus"})),
        ("ds.get", json!({"name": "tank/x", "props": ["BAD"]})),
        ("ds.set", json!({"name": "tank/x", "prop": "recordsize"})),
        ("obj.write", json!({"ds": "tank/x", "obj": 1})),
        ("obj.read", json!({"ds": "tank/x", "obj": -1, "len": 1})),
    ] {
        let r = call(&d, op, args.clone());
        let e = r.expect_err(&format!("{op} {args} should fail"));
        assert!(!e.contains('\n'), "{e}");
        assert!(!e.is_empty());
    }
    assert_eq!(call(&d, "pool.list", json!({})).unwrap(), json!([]));
    assert_eq!(
        state::load(&home).unwrap().pools.len(),
        0,
        "nothing was recorded"
    );
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn pool_and_dataset_lifecycle() {
    let (d, home) = test_daemon("lifecycle");
    let img = home.join("d0.img");
    let img_s = img.to_string_lossy().to_string();
    call(
        &d,
        "pool.create",
        json!({"name": "tank", "vdevs": [img_s], "size": "64M"}),
    )
    .unwrap();
    assert_eq!(state::load(&home).unwrap().pools[0].name, "tank");
    // The same device cannot be used twice.
    let e = call(
        &d,
        "pool.create",
        json!({"name": "tank2", "vdevs": [img_s], "size": "64M"}),
    )
    .unwrap_err();
    assert!(e.contains("in use"), "{e}");
    call(
        &d,
        "ds.create",
        json!({"name": "tank/db", "props": ["recordsize=16K"]}),
    )
    .unwrap();
    let rows = call(
        &d,
        "ds.get",
        json!({"name": "tank/db", "props": ["recordsize"]}),
    )
    .unwrap();
    assert_eq!(rows[0]["raw"], "16384");
    assert_eq!(rows[0]["source"], "local");
    let list = call(
        &d,
        "ds.list",
        json!({"name": "tank", "recursive": true, "props": ["name", "volsize"]}),
    )
    .unwrap();
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["tank", "tank/db"]);
    assert_eq!(list[1]["props"]["volsize"]["value"], "-");

    let obj = call(&d, "obj.create", json!({"ds": "tank/db"})).unwrap()["obj"]
        .as_u64()
        .unwrap();
    call(
        &d,
        "obj.write",
        json!({"ds": "tank/db", "obj": obj, "off": 5, "pattern": {"seed": 9, "len": 70000}}),
    )
    .unwrap();
    call(&d, "obj.fsync", json!({"ds": "tank/db"})).unwrap();
    let r = call(
        &d,
        "obj.read",
        json!({"ds": "tank/db", "obj": obj, "off": 5, "len": 70000, "check_seed": 9}),
    )
    .unwrap();
    assert_eq!(r["len"], 70000);
    assert_eq!(r["pattern_ok"], true);
    let mut expect = vec![0u8; 70000];
    pattern::fill_pattern(9, 5, &mut expect);
    assert_eq!(r["blake3"], blake3::hash(&expect).to_hex().to_string());

    call(&d, "pool.export", json!({"name": "tank"})).unwrap();
    assert!(state::load(&home).unwrap().pools.is_empty());
    let found = call(&d, "pool.import", json!({"dirs": [home.to_string_lossy()]})).unwrap();
    assert_eq!(found[0]["name"], "tank");
    call(
        &d,
        "pool.import",
        json!({"dirs": [home.to_string_lossy()], "name": "tank"}),
    )
    .unwrap();
    let r = call(
        &d,
        "obj.read",
        json!({"ds": "tank/db", "obj": obj, "off": 5, "len": 70000, "check_seed": 9}),
    )
    .unwrap();
    assert_eq!(r["pattern_ok"], true);
    call(&d, "pool.destroy", json!({"name": "tank"})).unwrap();
    assert!(call(&d, "pool.list", json!({}))
        .unwrap()
        .as_array()
        .unwrap()
        .is_empty());
    d.shutdown();
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn read_only_ops() {
    assert!(is_read_only("pool.list"));
    assert!(is_read_only("ds.get"));
    assert!(!is_read_only("pool.create"));
    assert!(!is_read_only("obj.read"));
    for op in READ_ONLY_OPS {
        assert!(OPS.iter().any(|(n, _)| n == op));
    }
}

#[test]
fn types_and_aliases() {
    assert_eq!(parse_types(None).unwrap(), vec!["filesystem", "volume"]);
    assert_eq!(parse_types(Some("volume")).unwrap(), vec!["volume"]);
    assert_eq!(parse_types(Some("all")).unwrap().len(), 3);
    assert!(parse_types(Some("x")).is_err());
    assert_eq!(canonical_prop("avail"), "available");
    assert_eq!(canonical_prop("recordsize"), "recordsize");
    let mut v = vec!["tank/a/b", "tank/a-x", "tank", "tank/a"];
    v.sort_by_key(|n| tree_key(n));
    assert_eq!(v, vec!["tank", "tank/a", "tank/a/b", "tank/a-x"]);
}
