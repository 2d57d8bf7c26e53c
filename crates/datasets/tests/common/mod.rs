//! Shared helpers for engine tests: a deterministic RNG, simulated devices and an
//! in-memory model of object contents.
#![allow(dead_code)]

use cachalot_datasets::{Store, StoreOpts};
use cachalot_pool::{BlockDevice, SimDevice};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// SplitMix64: small, fast, reproducible from a printed seed.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
    /// Bytes that are either compressible (repeated text) or noise.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        if self.chance(50) {
            let word = format!("row-{:08x};", self.next() as u32);
            word.bytes().cycle().take(len).collect()
        } else {
            (0..len).map(|_| self.next() as u8).collect()
        }
    }
}

/// Options for tests: commits only when asked.
pub fn manual_opts() -> StoreOpts {
    StoreOpts {
        arc_max: 16 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    }
}

/// Create filesystem dataset `name` with compression off (tests that count
/// bytes on the devices need them stored as written).
pub fn create_uncompressed_fs(store: &Store, name: &str) {
    create_uncompressed_fs_with(store, name, &[]);
}

/// `create_uncompressed_fs` with more properties (e.g. a recordsize that sets
/// how many blocks a test's bytes make).
pub fn create_uncompressed_fs_with(store: &Store, name: &str, props: &[(&str, &str)]) {
    let props: Vec<(String, String)> = [("compression", "off")]
        .iter()
        .chain(props)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    store
        .create_dataset(
            name,
            cachalot_datasets::DatasetKind::Filesystem,
            None,
            &props,
            false,
        )
        .unwrap();
}

pub fn sim_devices(n: usize, size: u64) -> Vec<SimDevice> {
    (0..n)
        .map(|i| SimDevice::new(&format!("d{i}"), size))
        .collect()
}

pub fn as_dyn(devs: &[SimDevice]) -> Vec<Arc<dyn BlockDevice>> {
    devs.iter()
        .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
        .collect()
}

/// Object contents by dataset name and object id.
pub type Model = BTreeMap<String, BTreeMap<u64, Vec<u8>>>;

/// Apply a write to a model object.
pub fn model_write(obj: &mut Vec<u8>, off: u64, data: &[u8]) {
    let end = off as usize + data.len();
    if obj.len() < end {
        obj.resize(end, 0);
    }
    obj[off as usize..end].copy_from_slice(data);
}

/// Check that the store holds exactly the model.
pub fn assert_matches(store: &Store, model: &Model, ctx: &str) {
    let names: Vec<String> = store
        .list(None, true)
        .unwrap()
        .into_iter()
        .map(|d| d.name)
        .collect();
    let want: Vec<String> = model.keys().cloned().collect();
    assert_eq!(names, want, "{ctx}: dataset list differs");
    for (ds_name, objs) in model {
        let ds = store.dataset(ds_name).unwrap();
        let ids = ds.list_objects().unwrap();
        assert_eq!(
            ids,
            objs.keys().copied().collect::<Vec<_>>(),
            "{ctx}: objects of {ds_name} differ"
        );
        for (id, content) in objs {
            let size = ds.object_size(*id).unwrap();
            assert_eq!(
                size,
                content.len() as u64,
                "{ctx}: size of {ds_name} obj {id}"
            );
            let got = ds.read(*id, 0, content.len() + 10).unwrap();
            assert!(
                got == *content,
                "{ctx}: content of {ds_name} obj {id} differs"
            );
        }
    }
}

/// One random operation on the model and the store (no sync).
pub fn random_op(rng: &mut Rng, store: &Store, model: &mut Model, max_obj_size: u64) {
    let names: Vec<String> = model.keys().cloned().collect();
    let ds_name = names[rng.below(names.len() as u64) as usize].clone();
    let ds = store.dataset(&ds_name).unwrap();
    let objs = model.get_mut(&ds_name).unwrap();
    let ids: Vec<u64> = objs.keys().copied().collect();
    let roll = rng.below(100);
    if ids.is_empty() || roll < 10 {
        let id = ds.create_object().unwrap();
        assert!(!objs.contains_key(&id), "object id {id} reused while live");
        objs.insert(id, Vec::new());
        return;
    }
    let id = ids[rng.below(ids.len() as u64) as usize];
    if roll < 15 {
        ds.delete_object(id).unwrap();
        objs.remove(&id);
    } else if roll < 25 {
        let size = rng.below(max_obj_size);
        ds.truncate(id, size).unwrap();
        objs.get_mut(&id).unwrap().resize(size as usize, 0);
    } else {
        let off = rng.below(max_obj_size);
        let max_len = if rng.chance(30) { 200_000 } else { 20_000 };
        let len = 1 + rng.below(max_len) as usize;
        let data = rng.bytes(len);
        ds.write(id, off, &data).unwrap();
        model_write(objs.get_mut(&id).unwrap(), off, &data);
    }
}

/// Every object of a dataset (or snapshot handle) with its whole content.
pub fn contents(ds: &cachalot_datasets::Dataset) -> BTreeMap<u64, Vec<u8>> {
    ds.list_objects()
        .unwrap()
        .into_iter()
        .map(|id| {
            (
                id,
                ds.read(id, 0, ds.object_size(id).unwrap() as usize)
                    .unwrap(),
            )
        })
        .collect()
}

/// The content of snapshot `full`.
pub fn snap_content(store: &Store, full: &str) -> BTreeMap<u64, Vec<u8>> {
    contents(&store.snapshot_dataset(full).unwrap())
}
