//! Output helpers: zfs-style tables and dates.
//!
//! Invariants:
//! - Scripted mode (`-H`) prints no header and separates fields by exactly one tab,
//!   with no padding, in the column order given.
//! - Human mode pads columns with two spaces between them, right-aligns the columns
//!   marked numeric, and never leaves trailing spaces.

/// A table to print.
pub struct Table {
    pub headers: Vec<String>,
    pub right: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: Vec<String>, right: Vec<bool>) -> Table {
        Table {
            headers,
            right,
            rows: vec![],
        }
    }

    /// Render to a string (each line ends with '\n').
    pub fn render(&self, scripted: bool) -> String {
        let mut out = String::new();
        if scripted {
            for r in &self.rows {
                out.push_str(&r.join("\t"));
                out.push('\n');
            }
            return out;
        }
        let n = self.headers.len();
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let mut line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(n) {
                if i > 0 {
                    s.push_str("  ");
                }
                let pad = w[i].saturating_sub(c.chars().count());
                let last = i + 1 == n;
                if self.right.get(i).copied().unwrap_or(false) {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if !last {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.headers);
        for r in &self.rows {
            line(r);
        }
        out
    }
}

/// Local time like `date`: "Tue Jan  2 10:00:00 2024".
pub fn format_date(unix_secs: u64) -> String {
    let t = unix_secs as libc::time_t;
    // SAFETY: localtime_r and strftime write only into the buffers given to them.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return unix_secs.to_string();
        }
        let mut buf = [0u8; 64];
        let n = libc::strftime(
            buf.as_mut_ptr() as *mut libc::c_char,
            buf.len(),
            c"%a %b %e %H:%M:%S %Y".as_ptr(),
            &tm,
        );
        if n == 0 {
            return unix_secs.to_string();
        }
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }
}

/// "HH:MM:SS" for a duration in milliseconds (hours may exceed 99).
pub fn format_duration_ms(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_and_scripted() {
        let mut t = Table::new(
            vec!["NAME".into(), "USED".into(), "MOUNTPOINT".into()],
            vec![false, true, false],
        );
        t.rows
            .push(vec!["tank".into(), "108K".into(), "/tank".into()]);
        t.rows
            .push(vec!["tank/db".into(), "24K".into(), "-".into()]);
        assert_eq!(
            t.render(false),
            "NAME     USED  MOUNTPOINT\ntank     108K  /tank\ntank/db   24K  -\n"
        );
        assert_eq!(t.render(true), "tank\t108K\t/tank\ntank/db\t24K\t-\n");
    }

    #[test]
    fn durations_and_dates() {
        assert_eq!(format_duration_ms(1500), "00:00:01");
        assert_eq!(format_duration_ms(3_723_000), "01:02:03");
        assert!(!format_date(0).is_empty());
    }
}
