//! Fail closed: a panic inside a change (an open `Tx`) leaves it half made, so
//! the pool suspends; the half change is neither logged nor committed, and an
//! import comes back at the state before it.

mod common;
use cachalot_datasets::Store;
use common::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

#[test]
fn a_panic_inside_a_change_suspends_the_pool_and_drops_the_change() {
    let devs = sim_devices(1, 64 << 20);
    let store = Store::create_on_devices("tank", as_dyn(&devs), false, manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    let a = ds.create_object().unwrap();
    ds.write(a, 0, b"before").unwrap();
    store.sync().unwrap();
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let tx = ds.begin(4096).unwrap();
        tx.write(a, 0, b"after!").unwrap();
        tx.create_object().unwrap();
        panic!("planted: half of a change made");
    }));
    assert!(caught.is_err());
    let why = store.pool().suspended().expect("the pool is suspended");
    assert!(why.contains("panic") && why.contains("tank"), "{why}");
    // No commit and no log write takes the half change.
    assert!(store.sync().is_err(), "a txg committed after the panic");
    assert!(ds.fsync().is_err(), "the log took a write after the panic");
    drop(ds);
    drop(store);
    let store = Store::import_devices(as_dyn(&devs), manual_opts()).unwrap();
    let ds = store.dataset("tank").unwrap();
    assert_eq!(ds.read(a, 0, 6).unwrap(), b"before");
    assert_eq!(ds.list_objects().unwrap(), vec![a]);
    store.verify().unwrap();
}
