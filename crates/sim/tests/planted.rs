//! With a planted bug compiled in (`cargo test -p cachalot-sim --features
//! planted-bugs`), the simulator finds it within the seeds CI runs. Alone in its
//! test binary: a planted bug is process-wide.

#[cfg(feature = "planted-bugs")]
#[test]
fn planted_bugs_are_found() {
    use cachalot_pool::plant::{plant, Bug};
    for bug in [Bug::NoFlushBeforeUberblock, Bug::NoLogFlush] {
        plant(bug);
        let found = (1..=24).find(|s| cachalot_sim::run(*s, 600).is_err());
        plant(Bug::None);
        assert!(found.is_some(), "{bug:?} not found in 24 seeds");
    }
}
