//! Export and import, power cuts and the recovery after one, and the checks
//! of the store against the model (catalog, contents, invariants).

use crate::{err, Objs, Sim, R};
use cachalot_datasets::Store;
use cachalot_pool::{BlockDevice, Power, SimDevice};

impl Sim {
    // ------------------------------------------------------ export, import, cuts

    pub(crate) fn export_import(&mut self) -> R<()> {
        self.check("export", self.store.export())?;
        if self.devs[0].is_cut() {
            return Ok(());
        }
        self.export_imported()
    }

    /// Import after a clean export: every device back, the model durable.
    pub(crate) fn export_imported(&mut self) -> R<()> {
        self.retire_store();
        self.store = Store::import_devices(self.with_cache(&self.devs), self.layout.opts())
            .map_err(err("import"))?;
        self.stats.exports += 1;
        self.mark_durable();
        self.full_check("after export and import")
    }

    /// Cut the power at one of the next device writes.
    pub(crate) fn arm_cut(&mut self) -> R<()> {
        if self.cut_armed == 0 {
            let n = self.devs[0].writes_issued() + self.rng.below(400);
            self.devs[0].cut_power_at_write(n);
            self.cut_armed = 1;
        }
        Ok(())
    }

    /// After a power cut: build the devices as they came back (each unflushed
    /// write kept or lost at random, the cut one torn; sometimes the log device
    /// does not come back), import, and check that the pool holds a state the
    /// model allows.
    pub(crate) fn recover(&mut self) -> R<()> {
        self.stats.power_cuts += 1;
        self.cut_armed = 0;
        // The process died: its queued background reads with it.
        self.io.discard();
        let power = Power::new();
        let mut devs = Vec::new();
        for d in &self.devs {
            let rng = &mut self.rng;
            let img = d.crash_image(|| rng.chance(50));
            let name = d.path().to_string_lossy();
            let name = name.strip_prefix("sim:").unwrap_or(&name);
            devs.push(SimDevice::on_power(name, img, power.clone()));
        }
        // The log device is the last one while present.
        let log_lost = self.devs.len() > self.layout.width && self.rng.chance(25);
        if log_lost {
            devs.pop();
            self.stats.log_losses += 1;
            if self.trace {
                eprintln!("  the log device is lost");
            }
        }
        self.devs = devs;
        // A replacement cut before its labels were durable left a blank
        // device: the pool does not know it (nor would an import scan take
        // it), so it stays out and is replaced again once imported.
        let unlabeled: Vec<usize> = (0..self.layout.width)
            .filter(|i| cachalot_pool::read_label(&self.devs[*i]).is_none())
            .collect();
        let present: Vec<SimDevice> = (0..self.devs.len())
            .filter(|i| !unlabeled.contains(i))
            .map(|i| self.devs[i].clone())
            .collect();
        self.retire_store();
        self.cache_dev = self.cache_dev.as_ref().map(|c| {
            let rng = &mut self.rng;
            SimDevice::on_power("cache", c.crash_image(|| rng.chance(50)), power.clone())
        });
        self.store = Store::import_devices(self.with_cache(&present), self.layout.opts())
            .map_err(err("import after a power cut"))?;
        let got = self.store_catalog()?;
        // The catalog is the committed one, or the one the interrupted
        // operation was committing; in the second case that commit landed and
        // holds every dataset exactly as the model has it.
        let landed = got != self.durable.catalog();
        let base = if got == self.model.catalog() {
            self.model.clone()
        } else if !landed {
            self.durable.clone()
        } else {
            return Err(format!(
                "after a power cut the catalog is {got:?}; expected the committed {:?} or the interrupted {:?}",
                self.durable.catalog(),
                self.model.catalog()
            ));
        };
        self.model = self.recovered_datasets(base, landed, log_lost)?;
        self.pinned.retain(|full| {
            let (fs, s) = full.split_once('@').unwrap();
            self.model
                .fs
                .get(fs)
                .is_some_and(|f| f.snaps.iter().any(|(n, _)| n == s))
        });
        self.recv_src.retain(|r, _| self.model.fs.contains_key(r));
        self.mark_durable();
        self.full_check("after a power cut")?;
        match unlabeled[..] {
            [] => self.check_resilvered(),
            [slot] if self.resilvering == Some(slot) => self.replace_again(slot),
            _ => Err(format!(
                "after a power cut devices {unlabeled:?} have no label (replacing {:?})",
                self.resilvering
            )),
        }
    }

    /// After a power cut: each dataset of `base` (the catalog the import
    /// found) as read back, which must be a state the model allows: any since
    /// its last acknowledged fsync or commit (the intent log replays a prefix
    /// of its records; every state since the commit if the log device was
    /// lost), or the latest one.
    fn recovered_datasets(
        &self,
        base: crate::Model,
        landed: bool,
        log_lost: bool,
    ) -> R<crate::Model> {
        let mut recovered = base;
        for (name, fs) in recovered.fs.iter_mut() {
            let ds = self.store.dataset(name).map_err(err("dataset"))?;
            let content = contents(&ds).map_err(err(&format!("read {name}")))?;
            // Any state since the last acknowledged fsync or commit (the intent
            // log replays a prefix of its records), or the latest one.
            let mut allowed: Vec<&Objs> = vec![];
            match self.hist.get(name) {
                // The fsyncs since the commit were acknowledged from the log.
                Some((h, _)) if !landed && log_lost => allowed.extend(h.iter()),
                Some((h, acked)) if !landed => allowed.extend(h[*acked..].iter()),
                _ => {}
            }
            if let Some(m) = self.model.fs.get(name) {
                allowed.push(&m.objs);
            }
            if !allowed.iter().any(|a| **a == content) {
                let snaps: Vec<String> = fs
                    .snaps
                    .iter()
                    .map(|(n, o)| format!("@{n} {}", shape(o)))
                    .collect();
                return Err(format!(
                    "after a power cut {name} holds {}, a state it never acknowledged passing through; allowed: {}; snapshots: {}",
                    shape(&content),
                    allowed.iter().map(|a| shape(a)).collect::<Vec<_>>().join(" | "),
                    snaps.join(" ")
                ));
            }
            fs.objs = content;
        }
        Ok(recovered)
    }

    // ------------------------------------------------------------------- checks

    pub(crate) fn store_catalog(&self) -> R<Vec<String>> {
        let mut v: Vec<String> = self
            .store
            .list(None, true)
            .map_err(err("list"))?
            .into_iter()
            .map(|d| d.name)
            .collect();
        v.extend(
            self.store
                .list_snapshots(None)
                .map_err(err("list snapshots"))?
                .into_iter()
                .map(|s| s.name),
        );
        v.sort();
        Ok(v)
    }

    pub(crate) fn check_catalog(&self, ctx: &str) -> R<()> {
        let got = self.store_catalog()?;
        if got != self.model.catalog() {
            return Err(format!(
                "{ctx}: the store lists {got:?}, the model {:?}",
                self.model.catalog()
            ));
        }
        Ok(())
    }

    pub(crate) fn check_fs(&self, name: &str, ctx: &str) -> R<()> {
        let fs = &self.model.fs[name];
        let ds = self.store.dataset(name).map_err(err("dataset"))?;
        if contents(&ds).map_err(err(name))? != fs.objs {
            return Err(format!("{ctx}: {name} differs from the model"));
        }
        for (s, objs) in &fs.snaps {
            let full = format!("{name}@{s}");
            let ds = self.store.snapshot_dataset(&full).map_err(err(&full))?;
            if contents(&ds).map_err(err(&full))? != *objs {
                return Err(format!("{ctx}: {full} differs from the model"));
            }
        }
        Ok(())
    }

    /// Every dataset and snapshot against the model, and the store's invariants.
    pub(crate) fn full_check(&mut self, ctx: &str) -> R<()> {
        self.check_catalog(ctx)?;
        for name in self.heads() {
            self.check_fs(&name, ctx)?;
        }
        self.store.verify().map_err(err(ctx))?;
        self.stats.full_checks += 1;
        Ok(())
    }
}

/// Objects and sizes, with a digest of the bytes (for messages).
pub(crate) fn shape(o: &Objs) -> String {
    let mut h = blake3::Hasher::new();
    let mut v = Vec::new();
    for (id, d) in o {
        h.update(d);
        v.push(format!("{id}:{}", d.len()));
    }
    format!("{{{}}} {}", v.join(","), &h.finalize().to_hex()[..8])
}

/// Bytes per read when `contents` reads an object: not a multiple of either
/// record size, so the reads of one object form a sequential stream that
/// read-ahead follows, with reads inside, across and ending mid-record.
const CONTENTS_CHUNK: u64 = 24 << 10;

/// Every object of a dataset with its whole content, read front to back.
pub(crate) fn contents(ds: &cachalot_datasets::Dataset) -> cachalot_datasets::Result<Objs> {
    let mut m = Objs::new();
    for id in ds.list_objects()? {
        let size = ds.object_size(id)?;
        let mut data = Vec::with_capacity(size as usize);
        for off in (0..size).step_by(CONTENTS_CHUNK as usize) {
            data.extend(ds.read(id, off, CONTENTS_CHUNK as usize)?);
        }
        m.insert(id, data);
    }
    Ok(m)
}
