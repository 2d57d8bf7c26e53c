//! With a planted bug compiled in (`cargo test -p cachalot-sim --features
//! planted-bugs`), the simulator finds it within the seeds CI runs (which all
//! pass without it). Alone in its test binary: a planted bug is process-wide.
//! Measured 2026-11-25 at 500 steps: see the report in the commit that added
//! this (no-flush-before-uberblock and no-log-flush both found by CI seeds).

#[cfg(feature = "planted-bugs")]
#[test]
fn planted_bugs_are_found() {
    use cachalot_pool::plant::{plant, Bug};
    for bug in [Bug::NoFlushBeforeUberblock, Bug::NoLogFlush] {
        plant(bug);
        let found = [2u64, 3, 4, 5, 6, 7]
            .into_iter()
            .filter(|s| cachalot_sim::run(*s, 500).is_err())
            .count();
        plant(Bug::None);
        assert!(found > 0, "{bug:?} not found by the CI seeds");
    }
}
