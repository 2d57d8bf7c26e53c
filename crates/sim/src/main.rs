//! `cachalot-sim --seed N --steps M`: run the deterministic simulator (see the
//! library) from one seed, or from `--seeds K` consecutive seeds. On a failure it
//! prints the command that replays it exactly and exits with status 1.

use clap::Parser;
use std::time::Instant;

#[derive(Parser)]
#[command(about = "Deterministic simulator of the Cachalot storage engine")]
struct Args {
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Steps (operations) per seed.
    #[arg(long, default_value_t = 2000)]
    steps: u64,
    /// Number of consecutive seeds to run, starting at --seed.
    #[arg(long, default_value_t = 1)]
    seeds: u64,
    /// Plant a bug first (needs --features planted-bugs):
    /// no-flush-before-uberblock, no-log-flush, raidz-no-reconstruct, resilver-skip-block.
    #[arg(long)]
    plant: Option<String>,
    /// Keep going after a failing seed (to count how many seeds find a bug).
    #[arg(long)]
    keep_going: bool,
}

fn main() {
    let a = Args::parse();
    if let Some(p) = &a.plant {
        let Some(bug) = cachalot_pool::plant::Bug::parse(p) else {
            eprintln!("--plant {p}: unknown bug (no-flush-before-uberblock, no-log-flush, raidz-no-reconstruct, resilver-skip-block)");
            std::process::exit(2);
        };
        if !cachalot_pool::plant::plant(bug) {
            eprintln!("--plant needs a build with --features planted-bugs");
            std::process::exit(2);
        }
    }
    // The engine's panics are failures the simulator reports itself.
    std::panic::set_hook(Box::new(|_| {}));
    let t0 = Instant::now();
    let (mut failed, mut steps) = (0u64, 0u64);
    for seed in a.seed..a.seed + a.seeds {
        let t = Instant::now();
        match cachalot_sim::run(seed, a.steps) {
            Ok(s) => {
                steps += s.steps;
                println!(
                    "seed {seed}: ok on {}, {} steps in {:.2}s ({} writes, {} reads, {} fsyncs, {} commits, {} snapshots, {} clones, {} rollbacks, {} sends, {} cut streams, {} exports, {} power cuts, {} faults, {} corruptions, {} scrubs, {} full checks, {} background reads, {} overloaded reads ({} failed), {} log devices lost, {} replacements, {} resilvers checked ({} resumed), {} L2ARC hits, {} cache corruptions, {} L2ARC checksum errors, {} overloads faulted a device) fingerprint {}",
                    s.layout,
                    s.steps,
                    t.elapsed().as_secs_f64(),
                    s.writes,
                    s.reads,
                    s.fsyncs,
                    s.commits,
                    s.snapshots,
                    s.clones,
                    s.rollbacks,
                    s.sends,
                    s.cut_streams,
                    s.exports,
                    s.power_cuts,
                    s.faults,
                    s.corruptions,
                    s.scrubs,
                    s.full_checks,
                    s.background_reads,
                    s.overload_reads,
                    s.overload_errors,
                    s.log_losses,
                    s.replacements,
                    s.resilvers_checked,
                    s.resilver_resumes,
                    s.l2_hits,
                    s.cache_corruptions,
                    s.l2_cksum_errors,
                    s.faulted_devices,
                    s.fingerprint
                );
            }
            Err(f) => {
                failed += 1;
                steps += f.step;
                println!("FAILED {f}");
                let plant = a
                    .plant
                    .as_ref()
                    .map(|p| format!(" --features planted-bugs -- --plant {p}"))
                    .unwrap_or_else(|| " --".into());
                println!(
                    "replay: cargo run -p cachalot-sim --release{plant} --seed {seed} --steps {}",
                    a.steps
                );
                if !a.keep_going {
                    std::process::exit(1);
                }
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "{} seeds, {failed} failed, {steps} steps in {secs:.1}s: {:.0} steps/s, {:.1} seeds/min",
        a.seeds,
        steps as f64 / secs,
        a.seeds as f64 * 60.0 / secs
    );
    if failed > 0 {
        std::process::exit(1);
    }
}
