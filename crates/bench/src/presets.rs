//! Presets reproducing the classic MySQL storage studies. A preset fixes what
//! varies between runs (the variants) and sensible defaults for the sweep; options
//! given on the command line override the defaults, never the variants.
//!
//! - `threads`: oltp_read_write at 1, 4, 8, 16, 32, 64 threads (the default).
//! - `flush-method`: innodb_flush_method fsync, O_DSYNC, O_DIRECT at 16 threads.
//! - `buffer-pool`: buffer pool 100M to 1400M over a fixed data set (8 x 500,000
//!   rows, ~1 GB) at 16 threads: the double-buffering study.
//! - `compression`: dataset compression off, lz4, zstd on Cachalot targets, each
//!   with fresh data, thread sweep.
//!
//! Invariants: a plan has at least one variant and one thread count; variant
//! names are unique; only the compression preset needs fresh data per variant.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    Threads,
    FlushMethod,
    BufferPool,
    Compression,
}

impl Preset {
    pub fn as_str(self) -> &'static str {
        match self {
            Preset::Threads => "threads",
            Preset::FlushMethod => "flush-method",
            Preset::BufferPool => "buffer-pool",
            Preset::Compression => "compression",
        }
    }

    /// What the preset varies, for report headings.
    pub fn varies(self) -> &'static str {
        match self {
            Preset::Threads => "threads",
            Preset::FlushMethod => "innodb_flush_method",
            Preset::BufferPool => "innodb_buffer_pool_size",
            Preset::Compression => "compression",
        }
    }
}

/// One configuration measured in a study.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Variant {
    pub name: String,
    /// innodb_flush_method override.
    pub flush_method: Option<String>,
    /// innodb_buffer_pool_size override, bytes.
    pub buffer_pool: Option<u64>,
    /// Cachalot dataset compression to set before the data is created.
    pub compression: Option<String>,
}

impl Variant {
    pub fn base() -> Variant {
        Variant {
            name: "default".into(),
            flush_method: None,
            buffer_pool: None,
            compression: None,
        }
    }

    /// True if the variant needs a freshly created data set (a property that
    /// applies only to data written after it was set).
    pub fn fresh_data(&self) -> bool {
        self.compression.is_some()
    }
}

/// Defaults a preset brings (each overridable on the command line).
#[derive(Debug, Clone, PartialEq)]
pub struct PresetPlan {
    pub variants: Vec<Variant>,
    pub threads: Vec<u32>,
    pub tables: u32,
    pub table_size: u64,
}

pub const DEFAULT_THREADS: &[u32] = &[1, 4, 8, 16, 32, 64];
pub const BUFFER_POOL_SIZES: &[u64] = &[100, 200, 400, 800, 1400];

/// The plan of a preset (or of no preset).
pub fn plan(preset: Option<Preset>) -> PresetPlan {
    let mut p = PresetPlan {
        variants: vec![Variant::base()],
        threads: DEFAULT_THREADS.to_vec(),
        tables: 8,
        table_size: 200_000,
    };
    match preset {
        None | Some(Preset::Threads) => {}
        Some(Preset::FlushMethod) => {
            p.threads = vec![16];
            p.variants = ["fsync", "O_DSYNC", "O_DIRECT"]
                .iter()
                .map(|m| Variant {
                    name: m.to_string(),
                    flush_method: Some(m.to_string()),
                    ..Variant::base()
                })
                .collect();
        }
        Some(Preset::BufferPool) => {
            p.threads = vec![16];
            p.table_size = 500_000;
            p.variants = BUFFER_POOL_SIZES
                .iter()
                .map(|mb| Variant {
                    name: format!("{mb}M"),
                    buffer_pool: Some(mb << 20),
                    ..Variant::base()
                })
                .collect();
        }
        Some(Preset::Compression) => {
            p.variants = ["off", "lz4", "zstd"]
                .iter()
                .map(|c| Variant {
                    name: c.to_string(),
                    compression: Some(c.to_string()),
                    ..Variant::base()
                })
                .collect();
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_has_unique_variants_and_threads() {
        for p in [
            None,
            Some(Preset::Threads),
            Some(Preset::FlushMethod),
            Some(Preset::BufferPool),
            Some(Preset::Compression),
        ] {
            let pl = plan(p);
            assert!(!pl.variants.is_empty() && !pl.threads.is_empty(), "{p:?}");
            let mut names: Vec<_> = pl.variants.iter().map(|v| v.name.clone()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), pl.variants.len(), "{p:?}");
            assert_eq!(
                pl.variants.iter().any(Variant::fresh_data),
                p == Some(Preset::Compression)
            );
        }
    }

    #[test]
    fn studies_match_the_published_ones() {
        assert_eq!(
            plan(Some(Preset::Threads)).threads,
            vec![1, 4, 8, 16, 32, 64]
        );
        let f = plan(Some(Preset::FlushMethod));
        assert_eq!(
            f.variants
                .iter()
                .map(|v| v.flush_method.clone().unwrap())
                .collect::<Vec<_>>(),
            ["fsync", "O_DSYNC", "O_DIRECT"]
        );
        let b = plan(Some(Preset::BufferPool));
        assert_eq!(b.variants.first().unwrap().buffer_pool, Some(100 << 20));
        assert_eq!(b.variants.last().unwrap().buffer_pool, Some(1400 << 20));
        // The data set is larger than the smallest pool and fits the largest.
        let data = b.tables as u64 * b.table_size * 262;
        assert!(data > 100 << 20 && data < 1400 << 20);
    }
}
