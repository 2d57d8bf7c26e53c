//! The simulator in `make test`: a bounded number of seeds (longer runs on
//! demand: `cargo run -p cachalot-sim --release -- --seed 1 --seeds 100 --steps 5000`).

/// Seeds and steps CI runs; sized to stay well under a minute on a shared core.
const SEEDS: u64 = 4;
const STEPS: u64 = 500;

#[test]
fn simulator_seeds_pass() {
    for seed in 1..=SEEDS {
        if let Err(f) = cachalot_sim::run(seed, STEPS) {
            panic!(
                "{f}\nreplay: cargo run -p cachalot-sim --release -- --seed {seed} --steps {STEPS}"
            );
        }
    }
}

/// A run is a function of its seed: the same seed leaves the same bytes on the
/// devices (guids, times and commit points included).
#[test]
fn same_seed_same_bytes() {
    let a = cachalot_sim::run(1000, 300).unwrap();
    let b = cachalot_sim::run(1000, 300).unwrap();
    assert_eq!(a.fingerprint, b.fingerprint);
    let c = cachalot_sim::run(1001, 300).unwrap();
    assert_ne!(a.fingerprint, c.fingerprint);
}
