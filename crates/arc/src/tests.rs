use std::collections::HashMap;

use super::*;

/// Tiny xorshift64* PRNG so the tests need no dependencies.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform-ish in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// `true` with probability `percent / 100`.
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

fn val(len: usize, tag: u8) -> Value {
    Value::from(vec![tag; len])
}

const UNIT: usize = 100;

/// Demand read through the cache: get, and insert on a miss.
fn read(cache: &Arc<u64>, key: u64, len: usize) -> bool {
    if cache.get(&key, Kind::DATA).is_some() {
        return true;
    }
    cache.insert(key, val(len, key as u8), Kind::DATA);
    false
}

#[test]
fn random_workload_never_exceeds_limit() {
    for seed in 1..=4u64 {
        let mut rng = Rng::new(seed);
        let cache: Arc<u64> = Arc::new(50_000);
        // The last value inserted per key: a hit must return exactly it.
        let mut model: HashMap<u64, Value> = HashMap::new();
        for step in 0..20_000u32 {
            let key = rng.below(300);
            let kind = Kind::new(
                if rng.chance(30) {
                    Class::Metadata
                } else {
                    Class::Data
                },
                if rng.chance(20) {
                    Demand::Prefetch
                } else {
                    Demand::Demand
                },
            );
            let len = match rng.below(100) {
                0..=1 => 0,
                2 => (cache.max_bytes() + 1 + rng.below(1000)) as usize,
                _ => 1 + rng.below(2000) as usize,
            };
            match rng.below(1000) {
                0..=449 => {
                    if let Some(v) = cache.get(&key, kind) {
                        let want = model.get(&key).expect("hit on a key never inserted");
                        assert!(
                            std::sync::Arc::ptr_eq(&v, want),
                            "stale value (seed {seed}, step {step})"
                        );
                    } else if rng.chance(70) {
                        let v = val(len, step as u8);
                        cache.insert(key, v.clone(), kind);
                        if (v.len() as u64).max(1) <= cache.max_bytes() {
                            model.insert(key, v);
                        } else {
                            model.remove(&key);
                        }
                    }
                }
                450..=849 => {
                    let v = val(len, step as u8);
                    cache.insert(key, v.clone(), kind);
                    if (v.len() as u64).max(1) <= cache.max_bytes() {
                        model.insert(key, v);
                    } else {
                        model.remove(&key);
                    }
                }
                850..=989 => {
                    cache.remove(&key);
                    model.remove(&key);
                    assert!(!cache.contains(&key));
                    assert_eq!(cache.residency(&key), None);
                }
                990..=998 => {
                    let m = rng.below(100_000);
                    cache.set_max_bytes(m);
                    assert!(cache.size_bytes() <= m);
                }
                _ => {
                    cache.clear();
                    model.clear();
                    assert!(cache.is_empty());
                }
            }
            cache.check();
            let s = cache.stats();
            assert!(cache.size_bytes() <= cache.max_bytes());
            assert_eq!(s.size_bytes(), cache.size_bytes());
            assert_eq!(s.entries as usize, cache.len());
            assert!(s.t1_bytes + s.b1_bytes <= s.c);
            assert!(s.t1_bytes + s.t2_bytes + s.b1_bytes + s.b2_bytes <= 2 * s.c);
            assert!(s.p <= s.c);
        }
        // Make sure the workload actually exercised the interesting paths.
        let s = cache.stats();
        assert!(s.hits_total() > 1000, "{s:?}");
        assert!(s.evictions > 1000, "{s:?}");
        assert!(s.ghost_hits_b1 > 0 && s.ghost_hits_b2 > 0, "{s:?}");
        assert!(s.oversize_rejects > 0, "{s:?}");
    }
}

/// Builds a cache of 100 units whose hot set (keys 0..50, 50 units) has been
/// read twice, so it lives in T2.
fn warm_hot_set() -> Arc<u64> {
    let cache = Arc::new(100 * UNIT as u64);
    for _ in 0..3 {
        for k in 0..50 {
            read(&cache, k, UNIT);
        }
    }
    for k in 0..50 {
        assert_eq!(cache.residency(&k), Some(Residency::T2));
    }
    cache
}

fn hot_hits_after(cache: &Arc<u64>) -> u64 {
    cache.reset_stats();
    for k in 0..50 {
        cache.get(&k, Kind::DATA);
    }
    cache.stats().hits_total()
}

#[test]
fn scan_does_not_flush_hot_set() {
    let cache = warm_hot_set();
    // One pass over 100x the cache size, each block read once.
    for k in 1_000_000..1_010_000 {
        assert!(!read(&cache, k, UNIT));
        cache.check();
    }
    // A plain LRU would have 0 hits here.
    let hits = hot_hits_after(&cache);
    assert!(hits >= 48, "only {hits}/50 hot blocks survived the scan");
}

#[test]
fn scan_with_interleaved_hot_reads() {
    let cache = warm_hot_set();
    let mut rng = Rng::new(7);
    for (n, k) in (2_000_000u64..2_010_000).enumerate() {
        read(&cache, k, UNIT);
        if n % 4 == 0 {
            read(&cache, rng.below(50), UNIT);
        }
    }
    cache.check();
    let hits = hot_hits_after(&cache);
    assert!(hits >= 45, "only {hits}/50 hot blocks survived the scan");
}

#[test]
fn prefetched_scan_does_not_flush_hot_set() {
    // Sequential read with read-ahead: prefetch inserts the block, then the
    // demand read hits it. That single demand hit must not promote to T2.
    let cache = warm_hot_set();
    for k in 3_000_000..3_010_000 {
        assert!(cache.get(&k, Kind::DATA_PREFETCH).is_none());
        cache.insert(k, val(UNIT, 1), Kind::DATA_PREFETCH);
        assert!(cache.get(&k, Kind::DATA).is_some());
    }
    cache.check();
    let hits = hot_hits_after(&cache);
    assert!(hits >= 48, "only {hits}/50 hot blocks survived the scan");
}

/// c = 10 units; keys 100..105 in T2 (5 units); keys 0..10 read once so
/// T1 = 5..10 and B1 = 0..5.
fn b1_setup() -> Arc<u64> {
    let cache = Arc::new(10 * UNIT as u64);
    for k in 100..105 {
        read(&cache, k, UNIT);
        read(&cache, k, UNIT);
    }
    for k in 0..10 {
        read(&cache, k, UNIT);
    }
    cache.check();
    for k in 0..5 {
        assert_eq!(cache.residency(&k), Some(Residency::B1), "key {k}");
    }
    for k in 5..10 {
        assert_eq!(cache.residency(&k), Some(Residency::T1), "key {k}");
    }
    let s = cache.stats();
    assert_eq!(
        (s.t1_bytes, s.t2_bytes, s.b1_bytes, s.b2_bytes),
        (500, 500, 500, 0)
    );
    assert_eq!(s.p, 0);
    cache
}

#[test]
fn ghost_hit_in_b1_grows_p() {
    let cache = b1_setup();
    assert!(!read(&cache, 2, UNIT)); // still a miss: ghosts hold no data
    let s = cache.stats();
    assert_eq!(s.ghost_hits_b1, 1);
    assert_eq!(s.ghost_hits_b2, 0);
    // |B1| >= |B2| so the step is exactly the entry's size.
    assert_eq!(s.p, UNIT as u64);
    // A ghost hit is the second reference: straight to T2.
    assert_eq!(cache.residency(&2), Some(Residency::T2));
    // T1 (500 > p = 100) gave up its LRU entry.
    assert_eq!(cache.residency(&5), Some(Residency::B1));
    assert!(read(&cache, 2, UNIT));
    cache.check();
}

#[test]
fn ghost_hit_in_b2_shrinks_p() {
    let cache = b1_setup();
    // Three B1 hits raise p to 300; the third one evicts from T2 because
    // T1 (300) is no longer above p.
    for k in 0..3 {
        read(&cache, k, UNIT);
    }
    let before = cache.stats();
    assert_eq!(before.p, 300);
    assert_eq!(cache.residency(&100), Some(Residency::B2));
    assert!(before.b2_bytes > 0 && before.b1_bytes > 0);

    assert!(!read(&cache, 100, UNIT));
    let after = cache.stats();
    assert_eq!(after.ghost_hits_b2, 1);
    assert!(
        after.p < before.p,
        "p did not shrink: {before:?} -> {after:?}"
    );
    // Byte-weighted step: size * max(1, |B1| / |B2|).
    let mult = (before.b1_bytes / before.b2_bytes).max(1);
    assert!(mult > 1, "test should exercise the ratio: {before:?}");
    assert_eq!(after.p, before.p.saturating_sub(UNIT as u64 * mult));
    assert_eq!(cache.residency(&100), Some(Residency::T2));
    cache.check();
}

#[test]
fn ghost_hit_in_b1_weighted_by_ratio() {
    // Make B2 much larger than B1, then hit B1: the step is size * |B2|/|B1|.
    let cache: Arc<u64> = Arc::new(10 * UNIT as u64);
    for k in 0..10 {
        read(&cache, k, UNIT);
        read(&cache, k, UNIT);
    }
    // T2 is full and T1 empty, so shrinking the cache pushes T2 into B2.
    cache.set_max_bytes(5 * UNIT as u64);
    cache.set_max_bytes(10 * UNIT as u64);
    // Six once-read blocks: the sixth pushes T1's LRU (200) into B1.
    for k in 200..206 {
        read(&cache, k, UNIT);
    }
    let s = cache.stats();
    assert_eq!((s.t1_bytes, s.t2_bytes), (500, 500));
    assert_eq!((s.b1_bytes, s.b2_bytes), (100, 500));
    assert_eq!(cache.residency(&200), Some(Residency::B1));
    read(&cache, 200, UNIT);
    let after = cache.stats();
    assert_eq!(after.ghost_hits_b1, 1);
    assert_eq!(after.p, 5 * UNIT as u64);
    cache.check();
}

#[test]
fn ghost_lists_stay_bounded() {
    let cache: Arc<u64> = Arc::new(10 * UNIT as u64);
    let mut rng = Rng::new(99);
    for _ in 0..5000 {
        read(&cache, rng.below(40), UNIT);
        let s = cache.stats();
        assert!(s.t1_bytes + s.b1_bytes <= s.c, "{s:?}");
        assert!(
            s.t1_bytes + s.t2_bytes + s.b1_bytes + s.b2_bytes <= 2 * s.c,
            "{s:?}"
        );
        assert!(s.entries + s.ghost_entries <= 20);
    }
    cache.check();
}

#[test]
fn stats_count_by_kind() {
    let cache: Arc<u64> = Arc::new(1 << 20);
    assert!(cache.get(&1, Kind::DATA).is_none());
    cache.insert(1, val(10, 1), Kind::DATA);
    assert_eq!(&*cache.get(&1, Kind::DATA).unwrap(), &[1u8; 10][..]);
    assert!(cache.get(&2, Kind::METADATA).is_none());
    cache.insert(2, val(20, 2), Kind::METADATA);
    assert!(cache.get(&2, Kind::METADATA_PREFETCH).is_some());
    assert!(cache.get(&2, Kind::METADATA_PREFETCH).is_some());
    assert!(cache.get(&3, Kind::DATA_PREFETCH).is_none());

    let s = cache.stats();
    assert_eq!(s.hit(Kind::DATA), 1);
    assert_eq!(s.hit(Kind::METADATA), 0);
    assert_eq!(s.hit(Kind::DATA_PREFETCH), 0);
    assert_eq!(s.hit(Kind::METADATA_PREFETCH), 2);
    assert_eq!(s.miss(Kind::DATA), 1);
    assert_eq!(s.miss(Kind::METADATA), 1);
    assert_eq!(s.miss(Kind::DATA_PREFETCH), 1);
    assert_eq!(s.miss(Kind::METADATA_PREFETCH), 0);
    assert_eq!(s.hits[1][1], 2);
    assert_eq!(s.misses[0][1], 1);
    assert_eq!(s.hits_total(), 3);
    assert_eq!(s.misses_total(), 3);
    assert!((s.hit_ratio() - 0.5).abs() < 1e-9);
    assert_eq!(s.inserts, 2);
    assert_eq!(s.entries, 2);
    assert_eq!(s.evictions, 0);
    // Key 1 had a demand hit (T2); key 2 only prefetch hits (T1).
    assert_eq!(s.t2_bytes, 10);
    assert_eq!(s.t1_bytes, 20);
    assert_eq!(s.c, 1 << 20);

    cache.reset_stats();
    let s = cache.stats();
    assert_eq!(s.hits_total() + s.misses_total() + s.inserts, 0);
    assert_eq!(s.entries, 2);
}

#[test]
fn evictions_counted() {
    let cache: Arc<u64> = Arc::new(3 * UNIT as u64);
    for k in 0..4 {
        cache.insert(k, val(UNIT, 0), Kind::DATA);
    }
    let s = cache.stats();
    assert_eq!(s.evictions, 1);
    assert_eq!(s.evicted_bytes, UNIT as u64);
    assert_eq!(s.inserts, 4);
    assert_eq!(s.entries, 3);
    // T1 is full, so |T1| + |B1| <= c leaves no room for the ghost.
    assert_eq!(cache.residency(&0), None);
    assert!(cache.get(&0, Kind::DATA).is_none());
}

#[test]
fn promotion_rules() {
    let cache: Arc<u64> = Arc::new(1 << 20);
    cache.insert(1, val(5, 0), Kind::DATA);
    assert_eq!(cache.residency(&1), Some(Residency::T1));
    cache.get(&1, Kind::DATA_PREFETCH);
    assert_eq!(
        cache.residency(&1),
        Some(Residency::T1),
        "prefetch hit promoted"
    );
    cache.get(&1, Kind::DATA);
    assert_eq!(cache.residency(&1), Some(Residency::T2));
    cache.get(&1, Kind::DATA);
    assert_eq!(cache.residency(&1), Some(Residency::T2));

    // A prefetched block: its first demand read is its first real use.
    cache.insert(2, val(5, 0), Kind::METADATA_PREFETCH);
    cache.get(&2, Kind::METADATA);
    assert_eq!(cache.residency(&2), Some(Residency::T1));
    cache.get(&2, Kind::METADATA);
    assert_eq!(cache.residency(&2), Some(Residency::T2));
    cache.check();
}

#[test]
fn traced_get_reports_the_first_demand_use_of_a_prefetch() {
    let cache: Arc<u64> = Arc::new(1000);
    cache.insert(1, val(10, 1), Kind::DATA_PREFETCH);
    cache.insert(2, val(10, 2), Kind::DATA);
    assert!(!cache.get_traced(&1, Kind::DATA_PREFETCH).unwrap().1);
    assert!(cache.get_traced(&1, Kind::DATA).unwrap().1);
    assert!(!cache.get_traced(&1, Kind::DATA).unwrap().1);
    assert!(!cache.get_traced(&2, Kind::DATA).unwrap().1);
    assert!(cache.get_traced(&3, Kind::DATA).is_none());
}

#[test]
fn insert_replaces_existing_value() {
    let cache: Arc<u64> = Arc::new(1000);
    cache.insert(1, val(100, 1), Kind::DATA);
    cache.get(&1, Kind::DATA); // -> T2
    cache.insert(1, val(300, 2), Kind::DATA);
    assert_eq!(cache.residency(&1), Some(Residency::T2));
    assert_eq!(cache.size_bytes(), 300);
    assert_eq!(cache.len(), 1);
    assert_eq!(&*cache.get(&1, Kind::DATA).unwrap(), &[2u8; 300][..]);
    // Growing a value past what fits evicts others, never the value itself.
    cache.insert(2, val(600, 3), Kind::DATA);
    cache.insert(1, val(900, 4), Kind::DATA);
    assert_eq!(cache.size_bytes(), 900);
    assert!(!cache.contains(&2));
    assert_eq!(&*cache.get(&1, Kind::DATA).unwrap(), &[4u8; 900][..]);
    cache.check();
}

#[test]
fn remove_drops_entry_and_ghost() {
    let cache = b1_setup();
    // Cached entry.
    assert!(cache.contains(&7));
    cache.remove(&7);
    assert!(!cache.contains(&7));
    assert!(cache.get(&7, Kind::DATA).is_none());
    assert_eq!(cache.size_bytes(), 900);
    // Ghost: after removal a re-insert is not a ghost hit.
    assert_eq!(cache.residency(&1), Some(Residency::B1));
    cache.remove(&1);
    assert_eq!(cache.residency(&1), None);
    cache.insert(1, val(UNIT, 0), Kind::DATA);
    let s = cache.stats();
    assert_eq!(s.ghost_hits_b1, 0);
    assert_eq!(s.p, 0);
    assert_eq!(cache.residency(&1), Some(Residency::T1));
    // Removing an unknown key is a no-op.
    cache.remove(&12345);
    cache.check();
}

#[test]
fn oversize_value_not_cached() {
    let cache: Arc<u64> = Arc::new(1000);
    cache.insert(1, val(500, 1), Kind::DATA);
    cache.insert(2, val(1001, 2), Kind::DATA);
    assert!(!cache.contains(&2));
    assert!(cache.get(&2, Kind::DATA).is_none());
    assert!(
        cache.contains(&1),
        "oversize insert must not evict anything"
    );
    // Replacing with an oversize value drops the stale old value.
    cache.insert(1, val(5000, 3), Kind::DATA);
    assert!(cache.get(&1, Kind::DATA).is_none());
    assert_eq!(cache.size_bytes(), 0);
    let s = cache.stats();
    assert_eq!(s.oversize_rejects, 2);
    assert_eq!(s.inserts, 1);
    // Exactly c fits.
    cache.insert(3, val(1000, 4), Kind::DATA);
    assert!(cache.contains(&3));
    cache.check();
}

#[test]
fn zero_limit_caches_nothing() {
    let cache: Arc<u64> = Arc::new(0);
    cache.insert(1, val(0, 0), Kind::DATA);
    cache.insert(2, val(1, 0), Kind::DATA);
    assert!(cache.is_empty());
    assert_eq!(cache.size_bytes(), 0);
    cache.check();
}

#[test]
fn empty_values_are_charged() {
    let cache: Arc<u64> = Arc::new(10);
    for k in 0..1000 {
        cache.insert(k, val(0, 0), Kind::DATA);
    }
    assert_eq!(cache.len(), 10);
    assert_eq!(cache.size_bytes(), 10);
    assert!(cache.get(&999, Kind::DATA).is_some_and(|v| v.is_empty()));
    let s = cache.stats();
    assert!(s.ghost_entries <= 10, "{s:?}");
    cache.check();
}

#[test]
fn set_max_bytes_shrinks_and_grows() {
    let cache = b1_setup();
    for k in 0..3 {
        read(&cache, k, UNIT); // p = 300
    }
    assert_eq!(cache.stats().p, 300);
    cache.set_max_bytes(250);
    assert_eq!(cache.max_bytes(), 250);
    assert!(cache.size_bytes() <= 250);
    assert_eq!(cache.len(), 2);
    let s = cache.stats();
    assert_eq!(s.c, 250);
    assert!(s.p <= 250);
    assert!(s.t1_bytes + s.b1_bytes <= 250 && s.b1_bytes + s.b2_bytes + s.size_bytes() <= 500);
    cache.check();

    cache.set_max_bytes(0);
    assert!(cache.is_empty());
    assert_eq!(cache.stats().ghost_entries, 0);
    cache.check();

    cache.set_max_bytes(10 * UNIT as u64);
    for k in 0..10 {
        read(&cache, 500 + k, UNIT);
    }
    assert_eq!(cache.size_bytes(), 10 * UNIT as u64);
    cache.check();
}

#[test]
fn clear_empties_everything() {
    let cache = b1_setup();
    read(&cache, 0, UNIT);
    cache.clear();
    assert!(cache.is_empty());
    let s = cache.stats();
    assert_eq!(s.t1_bytes + s.t2_bytes + s.b1_bytes + s.b2_bytes, 0);
    assert_eq!(s.p, 0);
    assert_eq!(s.ghost_entries, 0);
    assert_eq!(s.c, 10 * UNIT as u64);
    assert!(s.inserts > 0, "counters are kept");
    assert_eq!(cache.residency(&100), None);
    assert!(!read(&cache, 100, UNIT));
    assert!(read(&cache, 100, UNIT));
    cache.check();
}

#[test]
fn string_keys_work() {
    let cache: Arc<String> = Arc::new(100);
    cache.insert("a".to_string(), val(10, 1), Kind::DATA);
    assert!(cache.get(&"a".to_string(), Kind::DATA).is_some());
    assert!(cache.get(&"b".to_string(), Kind::DATA).is_none());
    assert!(format!("{cache:?}").contains("entries: 1"));
}

#[test]
fn is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Arc<u64>>();
    assert_send_sync::<Arc<String>>();
    assert_send_sync::<ArcStats>();
}

#[test]
fn concurrent_use_keeps_invariants() {
    let cache: Arc<u64> = Arc::new(20_000);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                let mut rng = Rng::new(t + 100);
                for i in 0..5000u64 {
                    let key = rng.below(200);
                    let len = 1 + rng.below(500) as usize;
                    match rng.below(10) {
                        0..=6 => {
                            if cache.get(&key, Kind::DATA).is_none() {
                                cache.insert(key, val(len, key as u8), Kind::DATA);
                            }
                        }
                        7..=8 => cache.remove(&key),
                        _ => cache.set_max_bytes(10_000 + (i % 3) * 5_000),
                    }
                    assert!(cache.size_bytes() <= 20_000);
                }
            });
        }
    });
    cache.check();
    let s = cache.stats();
    assert!(s.size_bytes() <= s.c);
    assert!(s.hits_total() + s.misses_total() > 0);
    // Every hit must have returned the (only) value shape stored for its key.
    for key in 0..200u64 {
        if let Some(v) = cache.get(&key, Kind::DATA) {
            assert!(v.iter().all(|&b| b == key as u8));
        }
    }
}

#[test]
fn evict_hook_sees_every_evicted_value() {
    let cache: Arc<u64> = Arc::new(1000);
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s = seen.clone();
    cache.set_evict_hook(Box::new(move |k, v| s.lock().push((*k, v.len()))));
    for key in 0..5u64 {
        cache.insert(key, val(300, key as u8), Kind::DATA);
    }
    // 1000 bytes hold three values of 300: keys 0 and 1 were evicted, in order.
    assert_eq!(*seen.lock(), vec![(0, 300), (1, 300)]);
    assert_eq!(cache.stats().evictions, 2);
    // A remove is not an eviction: the hook is not told.
    cache.remove(&4);
    assert_eq!(seen.lock().len(), 2);
    cache.check();
}

#[test]
fn evict_hook_is_not_told_of_entries_kept_from_the_second_level() {
    let cache: Arc<u64> = Arc::new(1000);
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let s = seen.clone();
    cache.set_evict_hook(Box::new(move |k, _| s.lock().push(*k)));
    cache.insert_with_l2(0, val(300, 0), Kind::DATA, false);
    cache.insert(1, val(300, 1), Kind::DATA);
    // Key 2 is inserted again without the flag: the last insert counts.
    cache.insert(2, val(300, 2), Kind::DATA);
    cache.insert_with_l2(2, val(300, 2), Kind::DATA, false);
    for key in 3..6u64 {
        cache.insert(key, val(300, key as u8), Kind::DATA);
    }
    // 0, 1 and 2 were evicted; only 1 was offered to the second level.
    assert_eq!(cache.stats().evictions, 3);
    assert_eq!(*seen.lock(), vec![1]);
    cache.check();
}
