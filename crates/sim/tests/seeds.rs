//! The simulator in `make test`: a bounded set of seeds (longer runs on demand:
//! `cargo run -p cachalot-sim --release -- --seed 1 --seeds 100 --steps 5000`).
//!
//! Seeds 1 and 12 found a rollback committing the head at its snapshot's root,
//! whose intent log header an import then replayed and claimed (blocks freed
//! since and reused: freed again under live data, or counted twice).
//!
//! Seed 59 (100 steps) found the model taking a receive cut inside its BEGIN
//! record for a commit: it fails before it creates anything and commits
//! nothing, so a later power cut legitimately brought back a dataset's state
//! from before the write that preceded it. Seed 70 (1000 steps) found an
//! incremental send skipping the holes of an object deleted and recreated
//! under the same id: the target kept the old object's data there.
//!
//! Since the seed draws the pool layout too, the seeds above replay other runs
//! than the ones that found those bugs. Seed 275 (170 steps, raidz2 of 4 + log)
//! found the model calling a received dataset unchanged when its writes had
//! brought back its snapshot's bytes (the engine, rightly, refuses a receive
//! without -F onto a dataset written since). Seeds 1, 6, 7 and 8 (300 steps,
//! layouts with a log device) found verify_blocks leaving the log device's
//! allocations out (zil::log_device_blocks_are_accounted).

//!
//! The replace step (and the cache device drawn after the rest of the layout)
//! changed every seed's draws again: all the seeds above now replay other runs
//! still. The replace step found, on seed 5 (a 2-way mirror, 400 steps), scrub
//! and resilver walking the datasets' heads only: blocks only snapshots held
//! were never rebuilt on a replacement (datasets
//! `resilver::replacement_gets_snapshot_only_blocks`). Seed 2008 (100 steps,
//! raidz2 of 6 + log + cache) found a replacement right after another's
//! resilver ended writing the same config_txg the end had written: a power
//! cut with only the new device's label rewritten let the import take the
//! older configuration, without the new device (pool
//! `devices::config_txg_grows_across_resilver_end_and_replace`).
//!
//! Seed 70 (a 2-way mirror, 241 steps) found a device FAULTED by read errors
//! missing the export's commit and coming back at import ONLINE, without a
//! resilver: replacing the other device then found a block corrupt in every
//! copy. The labels now record a faulted leaf as resilvering from txg 0 before
//! the first commit it misses (pool
//! `faulted::a_device_faulted_by_errors_comes_back_resilvering`). Seed 2012
//! (1000 steps, raidz1 of 5 + log) failed at step 370 on the model: a power
//! cut armed earlier fired inside the export after an overload faulted
//! devices, and the simulator imported and called durable what the cut had
//! dropped. Import no longer rewinds past a committed txg silently either
//! (pool `rewind`). Of the run `--seed 2000 --seeds 200 --steps 1000` (34
//! seeds), 2006, 2023, 2039 and 2040 failed too and pass since the fixes of
//! that session.

/// Seeds CI runs (all pass today); sized to stay well under a minute. Their
/// layouts: raidz2 of 5, 3-way mirror, raidz1 of 5 with a cache device,
/// 2-way mirror, raidz1 of 4 with a log and a cache device, raidz1 of 3 with
/// a cache device.
pub const SEEDS: [u64; 6] = [2, 3, 4, 5, 6, 12];
pub const STEPS: u64 = 400;

#[test]
fn simulator_seeds_pass() {
    for seed in SEEDS {
        if let Err(f) = cachalot_sim::run(seed, STEPS) {
            panic!(
                "{f}\nreplay: cargo run -p cachalot-sim --release -- --seed {seed} --steps {STEPS}"
            );
        }
    }
}

/// Seeds that found something, each at the length that found it.
#[test]
fn found_seeds_pass() {
    for (seed, steps) in [(59, 100), (275, 170), (2008, 100), (70, 241), (2012, 371)] {
        if let Err(f) = cachalot_sim::run(seed, steps) {
            panic!(
                "{f}\nreplay: cargo run -p cachalot-sim --release -- --seed {seed} --steps {steps}"
            );
        }
    }
}

/// A run is a function of its seed: the same seed leaves the same bytes on the
/// devices (guids, times and commit points included), with read-ahead running
/// in the background (on the simulator's thread, `SimIo`).
#[test]
fn same_seed_same_bytes() {
    let a = cachalot_sim::run(2, 200).unwrap();
    let b = cachalot_sim::run(2, 200).unwrap();
    assert!(a.background_reads > 0, "read-ahead ran: {a:?}");
    assert_eq!(a.fingerprint, b.fingerprint);
    assert_eq!(a.background_reads, b.background_reads);
    let c = cachalot_sim::run(3, 200).unwrap();
    assert_ne!(a.fingerprint, c.fingerprint);
}
