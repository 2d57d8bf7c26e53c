//! Progress of a study: a bar (indicatif) with the current step and the time
//! left, computed from the schedule's per-step estimates. When stderr is not a
//! terminal, one plain line per step is printed instead.
//!
//! Invariants:
//! - Time left = estimates of the steps not started + what is left of the current
//!   step's estimate (never negative); it only depends on the schedule and clocks.
//! - Output goes to stderr only; stdout stays for the final summary.
//! - A background thread redraws the bar; [`Progress::finish`] (or drop) stops it.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Seconds left given per-step estimates, the current step and its elapsed time.
pub fn time_left(estimates: &[f64], current: Option<usize>, elapsed: f64) -> f64 {
    match current {
        None => estimates.iter().sum(),
        Some(i) => {
            let rest: f64 = estimates.iter().skip(i + 1).sum();
            let cur = estimates.get(i).copied().unwrap_or(0.0);
            rest + (cur - elapsed).max(0.0)
        }
    }
}

/// "45s", "12m30s", "1h05m".
pub fn format_duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, s / 60 % 60)
    }
}

struct State {
    estimates: Vec<f64>,
    current: Option<usize>,
    label: String,
    step_start: Instant,
}

impl State {
    fn done_estimate(&self) -> f64 {
        match self.current {
            None => 0.0,
            Some(i) => {
                let before: f64 = self.estimates.iter().take(i).sum();
                let cur = self.estimates.get(i).copied().unwrap_or(0.0);
                before + self.step_start.elapsed().as_secs_f64().min(cur * 0.99)
            }
        }
    }

    fn left(&self) -> f64 {
        time_left(
            &self.estimates,
            self.current,
            self.step_start.elapsed().as_secs_f64(),
        )
    }

    fn message(&self) -> String {
        format!(
            "step {}/{}: {} (~{} left)",
            self.current.map_or(0, |i| i + 1),
            self.estimates.len(),
            self.label,
            format_duration(self.left())
        )
    }
}

pub struct Progress {
    state: Arc<Mutex<State>>,
    bar: Option<ProgressBar>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// A progress display for steps with these estimated durations (seconds).
    pub fn new(estimates: Vec<f64>) -> Progress {
        let total: f64 = estimates.iter().sum();
        let state = Arc::new(Mutex::new(State {
            estimates,
            current: None,
            label: "starting".into(),
            step_start: Instant::now(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        if !std::io::stderr().is_terminal() {
            return Progress {
                state,
                bar: None,
                stop,
                ticker: None,
            };
        }
        let bar = ProgressBar::with_draw_target(
            Some((total * 10.0).ceil().max(1.0) as u64),
            ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} {elapsed_precise} [{bar:30}] {percent:>3}% {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        let (b, st, sp) = (bar.clone(), state.clone(), stop.clone());
        let ticker = std::thread::spawn(move || {
            while !sp.load(Ordering::SeqCst) {
                if let Ok(s) = st.lock() {
                    b.set_position((s.done_estimate() * 10.0) as u64);
                    b.set_message(s.message());
                }
                b.tick();
                std::thread::sleep(Duration::from_millis(250));
            }
        });
        Progress {
            state,
            bar: Some(bar),
            stop,
            ticker: Some(ticker),
        }
    }

    /// Step `idx` (0-based, schedule order) starts now.
    pub fn step(&self, idx: usize, label: &str) {
        let msg = {
            let mut s = self.state.lock().expect("progress state");
            s.current = Some(idx);
            s.label = label.to_string();
            s.step_start = Instant::now();
            s.message()
        };
        match &self.bar {
            Some(b) => b.set_message(msg),
            None => eprintln!("bench: {msg}"),
        }
    }

    /// Print a line without garbling the bar.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    /// Stop the bar and remove it from the screen.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_left_counts_remaining_steps() {
        let e = [10.0, 20.0, 30.0];
        assert_eq!(time_left(&e, None, 0.0), 60.0);
        assert_eq!(time_left(&e, Some(0), 4.0), 56.0);
        assert_eq!(time_left(&e, Some(1), 25.0), 30.0); // overran: not negative
        assert_eq!(time_left(&e, Some(2), 30.0), 0.0);
    }

    #[test]
    fn durations() {
        assert_eq!(format_duration(44.6), "45s");
        assert_eq!(format_duration(750.0), "12m30s");
        assert_eq!(format_duration(3900.0), "1h05m");
        assert_eq!(format_duration(-3.0), "0s");
    }

    #[test]
    fn steps_without_a_terminal_do_not_panic() {
        let mut p = Progress::new(vec![1.0, 2.0]);
        p.step(0, "a");
        p.step(1, "b");
        p.println("note");
        p.finish();
    }
}
