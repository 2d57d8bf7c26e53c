//! With a planted bug compiled in (`cargo test -p cachalot-sim --features
//! planted-bugs`), the simulator finds it within the seeds CI runs (which all
//! pass without it). Alone in its test binary: a planted bug is process-wide.
//! Measured 2026-11-26 on the CI seeds at 400 steps (their layouts drawn by
//! the seed): no-flush-before-uberblock found by 4 of 6, no-log-flush by 3,
//! raidz-no-reconstruct by 1 (seed 12, raidz1 of 3: a corrupt column read
//! back as an error).

#[cfg(feature = "planted-bugs")]
#[test]
fn planted_bugs_are_found() {
    use cachalot_pool::plant::{plant, Bug};
    for bug in [
        Bug::NoFlushBeforeUberblock,
        Bug::NoLogFlush,
        Bug::RaidzNoReconstruct,
        Bug::ResilverSkipBlock,
    ] {
        plant(bug);
        let found = [2u64, 3, 4, 5, 6, 12]
            .into_iter()
            .filter(|s| cachalot_sim::run(*s, 400).is_err())
            .count();
        plant(Bug::None);
        assert!(found > 0, "{bug:?} not found by the CI seeds");
    }
}
