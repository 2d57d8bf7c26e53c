//! The pool layout a seed runs on: one device, a mirror, raidz1 or raidz2 of
//! various widths, with or without a separate log device and a cache device;
//! and which devices
//! the layout's redundancy lets the simulator damage.
//!
//! The layout is drawn from its own stream of the seed, so the layout and the
//! operations a seed draws do not depend on each other's draws.

use crate::Rng;
use cachalot_datasets::{Store, StoreOpts};
use cachalot_pool::{BlockDevice, Power, SimDevice, VdevKind};
use std::sync::Arc;

/// Usable bytes a layout aims at (a two-way mirror of 40 MiB devices).
const TARGET_CAPACITY: u64 = 40 << 20;
/// The separate log device's size.
const LOG_SIZE: u64 = 32 << 20;
/// The cache device's size (the smallest device a pool takes).
const CACHE_SIZE: u64 = cachalot_pool::label::MIN_DEVICE_SIZE;

#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub kind: VdevKind,
    /// Devices of the data vdev.
    pub width: usize,
    /// A separate log device (the last device).
    pub log: bool,
    /// Data devices that faults and corruption may hit: as many as the
    /// layout survives losing (none for a single device).
    pub victims: Vec<usize>,
    /// A cache device (L2ARC), kept apart from the data and log devices.
    pub cache: bool,
}

impl Layout {
    /// The layout of `seed`. Half the seeds draw the two-way mirror without a
    /// log, the rest spread over the other layouts.
    pub fn of_seed(seed: u64) -> Layout {
        let mut rng = Rng::new(seed ^ 0x6c61_796f_7574_2121);
        let (kind, width) = if rng.chance(50) {
            (VdevKind::Mirror, 2)
        } else {
            match rng.below(5) {
                0 => (VdevKind::Disk, 1),
                1 => (VdevKind::Mirror, 3),
                2 => (VdevKind::Raidz1, 3 + rng.below(3) as usize),
                _ => (VdevKind::Raidz2, 4 + rng.below(3) as usize),
            }
        };
        let log = (kind, width) != (VdevKind::Mirror, 2) && rng.chance(50);
        let survives = match kind {
            VdevKind::Disk => 0,
            VdevKind::Mirror => width - 1,
            VdevKind::Raidz1 => 1,
            VdevKind::Raidz2 => 2,
        };
        // The two-way mirror damages d0, as it always did.
        let mut victims: Vec<usize> = (0..width).collect();
        if width > 2 {
            for i in (1..width).rev() {
                victims.swap(i, rng.below(i as u64 + 1) as usize);
            }
        }
        victims.truncate(survives);
        // Drawn last: the draws above, and so every older seed's layout, stay.
        let cache = rng.chance(30);
        Layout {
            kind,
            width,
            log,
            victims,
            cache,
        }
    }

    /// Size of each data device: the same usable space whatever the layout.
    pub fn dev_size(&self) -> u64 {
        let data_cols = match self.kind {
            VdevKind::Disk | VdevKind::Mirror => 1,
            VdevKind::Raidz1 => self.width as u64 - 1,
            VdevKind::Raidz2 => self.width as u64 - 2,
        };
        (TARGET_CAPACITY / data_cols)
            .next_multiple_of(1 << 20)
            .max(cachalot_pool::label::MIN_DEVICE_SIZE)
    }

    /// Data devices the layout survives losing.
    pub fn survives(&self) -> usize {
        self.victims.len()
    }

    /// Name of data device `i` (`sim:dI`).
    pub fn dev_name(i: usize) -> String {
        format!("d{i}")
    }

    /// The devices, blank: the data devices, then the log device.
    pub fn blank_devices(&self, power: &Arc<Power>) -> Vec<SimDevice> {
        let mut devs: Vec<SimDevice> = (0..self.width)
            .map(|i| {
                let img = vec![0; self.dev_size() as usize];
                SimDevice::on_power(&Self::dev_name(i), img, power.clone())
            })
            .collect();
        if self.log {
            devs.push(SimDevice::on_power(
                "log",
                vec![0; LOG_SIZE as usize],
                power.clone(),
            ));
        }
        devs
    }

    /// The cache device, blank, if the layout has one.
    pub fn blank_cache(&self, power: &Arc<Power>) -> Option<SimDevice> {
        self.cache
            .then(|| SimDevice::on_power("cache", vec![0; CACHE_SIZE as usize], power.clone()))
    }

    /// The store's options: with a cache device, an ARC small enough that
    /// the simulator's data overflows it into the L2ARC.
    pub fn opts(&self) -> StoreOpts {
        StoreOpts {
            arc_max: if self.cache { 2 << 20 } else { 8 << 20 },
            txg_timeout: std::time::Duration::from_secs(5),
            dirty_max: 64 << 20,
        }
    }

    /// Create pool `name` on `devs` (from `blank_devices`).
    pub fn create(
        &self,
        name: &str,
        devs: &[SimDevice],
        opts: StoreOpts,
    ) -> cachalot_datasets::Result<Arc<Store>> {
        let mut all = as_dyn(devs);
        let log = all.split_off(self.width);
        if self.kind == VdevKind::Disk {
            // A single data device: a plain disk vdev.
            return Store::create_on_devices_with_log(name, all, false, log, opts);
        }
        Store::create_on_group_with_log(name, all, self.kind, log, opts)
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.kind {
            VdevKind::Disk => "disk",
            VdevKind::Mirror => "mirror",
            VdevKind::Raidz1 => "raidz1",
            VdevKind::Raidz2 => "raidz2",
        };
        write!(f, "{kind} of {}", self.width)?;
        if self.log {
            write!(f, " + log")?;
        }
        if self.cache {
            write!(f, " + cache")?;
        }
        let v: Vec<String> = self.victims.iter().map(|i| Self::dev_name(*i)).collect();
        write!(f, ", damage on [{}]", v.join(" "))
    }
}

pub fn as_dyn(devs: &[SimDevice]) -> Vec<Arc<dyn BlockDevice>> {
    devs.iter()
        .map(|d| Arc::new(d.clone()) as Arc<dyn BlockDevice>)
        .collect()
}
