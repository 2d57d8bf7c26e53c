//! The fuzz targets on the stable toolchain (cargo-fuzz needs nightly): each
//! target runs over its checked-in corpus (`fuzz/corpus/NAME/`), then over random
//! inputs and mutations of the corpus (bit flips, byte sets, truncation,
//! extension, splices) for a bounded time. A panic fails the test and prints the
//! seed and input that caused it (also written to `test-artifacts/fuzz/`).
//!
//! Environment: CACHALOT_FUZZ_SECS (seconds per target, default 2),
//! CACHALOT_FUZZ_SEED (default: from the clock; printed), CACHALOT_FUZZ_ONLY=NAME.

use cachalot_fuzzing::TARGETS;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The message of the last panic (the hook keeps it instead of printing it).
static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// SplitMix64: small, seedable, good enough to drive mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = repo().join("fuzz/corpus").join(name);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    files.iter().filter_map(|p| std::fs::read(p).ok()).collect()
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    if seeds.is_empty() || rng.below(8) == 0 {
        let max = if rng.below(4) == 0 { 20000 } else { 700 };
        let len = rng.below(max);
        return (0..len).map(|_| rng.next() as u8).collect();
    }
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(8) {
        match rng.below(8) {
            0 | 1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
            }
            3 | 7 if !v.is_empty() => {
                // An interesting integer at a random place (lengths, counts).
                // Formats align their fields to 8 bytes: mostly hit a field.
                let mut i = rng.below(v.len());
                if rng.below(2) == 0 {
                    i &= !7;
                }
                let x: u64 = [0, 1, u64::MAX, u32::MAX as u64, 1 << 31, 1 << 63][rng.below(6)];
                for (k, b) in x.to_le_bytes().iter().enumerate() {
                    if let Some(slot) = v.get_mut(i + k) {
                        *slot = *b;
                    }
                }
            }
            4 => v.truncate(rng.below(v.len() + 1)),
            5 => v.extend((0..rng.below(64)).map(|_| rng.next() as u8)),
            _ => {
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() && !v.is_empty() {
                    let (a, b) = (rng.below(v.len()), rng.below(other.len()));
                    v.truncate(a);
                    v.extend_from_slice(&other[b..]);
                }
            }
        }
    }
    v
}

fn run_one(name: &str, f: fn(&[u8]), secs: f64, seed: u64) {
    let seeds = corpus(name);
    let mut rng = Rng(seed ^ blake3::hash(name.as_bytes()).as_bytes()[0] as u64);
    let check = |input: &[u8], what: &str| {
        let r = std::panic::catch_unwind(|| f(input));
        if r.is_err() {
            let dir = repo().join("test-artifacts/fuzz");
            let _ = std::fs::create_dir_all(&dir);
            let path = dir.join(format!("crash-{name}"));
            let _ = std::fs::write(&path, input);
            drop(std::panic::take_hook());
            let why = LAST_PANIC.lock().unwrap().clone();
            panic!(
                "fuzz target {name} panicked on {what} (seed {seed}): {why}\ninput ({} bytes) \
                 saved to {}",
                input.len(),
                path.display()
            );
        }
    };
    for (i, s) in seeds.iter().enumerate() {
        check(s, &format!("corpus file {i}"));
    }
    let start = Instant::now();
    let mut execs = 0u64;
    while start.elapsed() < Duration::from_secs_f64(secs) {
        let input = mutate(&mut rng, &seeds);
        check(&input, &format!("mutated input {execs}"));
        execs += 1;
    }
    let rate = execs as f64 / start.elapsed().as_secs_f64();
    println!(
        "fuzz {name}: {} corpus inputs, {execs} generated in {secs} s ({rate:.0} execs/s), seed {seed}",
        seeds.len()
    );
}

#[test]
fn fuzz_targets_on_stable() {
    let secs: f64 = std::env::var("CACHALOT_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let seed: u64 = std::env::var("CACHALOT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let only = std::env::var("CACHALOT_FUZZ_ONLY").ok();
    // A target's panic is caught and reported by `check` with its message.
    std::panic::set_hook(Box::new(|info| {
        *LAST_PANIC.lock().unwrap() = info.to_string()
    }));
    for (name, f) in TARGETS {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        run_one(name, *f, secs, seed);
    }
    let _ = std::panic::take_hook();
}
