//! The data operations of a step (writes, truncates, object creates and
//! deletes, reads, fsyncs), commits, and the model's record of what is
//! durable: the last acknowledged commit and each dataset's states since.

use crate::checks::shape;
use crate::{err, Objs, Sim, MAX_OBJECTS, MAX_OFF, R};
use std::time::Duration;

impl Sim {
    // ---------------------------------------------------------------- model state

    /// Everything in the model is committed: the durable state and each
    /// dataset's history restart here.
    pub(crate) fn mark_durable(&mut self) {
        if self.trace {
            eprintln!(
                "  durable: {:?}",
                self.model
                    .fs
                    .iter()
                    .map(|(n, f)| format!("{n} {}", shape(&f.objs)))
                    .collect::<Vec<_>>()
            );
        }
        self.durable = self.model.clone();
        self.hist = self
            .model
            .fs
            .iter()
            .map(|(n, f)| (n.clone(), (vec![f.objs.clone()], 0)))
            .collect();
    }

    /// A data operation on `name` changed it from `pre`; `committed` says a
    /// commit happened inside the operation (before its change).
    pub(crate) fn note_change(&mut self, name: &str, pre: Objs, committed: bool) {
        if self.recv_src.contains_key(name) {
            self.touched.insert(name.to_string());
        }
        let now = self.model.fs[name].objs.clone();
        if self.trace {
            eprintln!(
                "  {name}: {} -> {}{}",
                shape(&pre),
                shape(&now),
                if committed {
                    " (a commit before it)"
                } else {
                    ""
                }
            );
        }
        if committed && !self.devs[0].is_cut() {
            // The commit holds everything before this operation.
            let post = self.model.clone();
            self.model.fs.get_mut(name).unwrap().objs = pre.clone();
            self.mark_durable();
            self.model = post;
            let h = self.hist.get_mut(name).unwrap();
            h.0 = vec![pre, now];
            return;
        }
        self.hist
            .entry(name.to_string())
            .or_insert_with(|| (vec![pre], 0))
            .0
            .push(now);
    }

    /// The result of an engine call: after a power cut the engine runs on with
    /// devices that drop its writes, so later reads may fail; such an error is
    /// no finding (`None`: the operation may or may not have happened; the
    /// caller updates the model as if it had, and recovery sorts it out).
    pub(crate) fn check<T>(&self, what: &str, r: cachalot_datasets::Result<T>) -> R<Option<T>> {
        match r {
            Ok(v) => Ok(Some(v)),
            Err(_) if self.devs[0].is_cut() => Ok(None),
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    pub(crate) fn heads(&self) -> Vec<String> {
        self.model.fs.keys().cloned().collect()
    }

    pub(crate) fn new_name(&mut self, prefix: &str) -> String {
        self.next_name += 1;
        format!("{prefix}{}", self.next_name)
    }

    // ------------------------------------------------------------ data operations

    pub(crate) fn write(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ids: Vec<u64> = self.model.fs[&name].objs.keys().copied().collect();
        if ids.is_empty() {
            return self.create_object_in(&name);
        }
        let id = self.rng.pick(&ids);
        let off = self.rng.below(MAX_OFF);
        let max = if self.rng.chance(20) {
            64 << 10
        } else {
            8 << 10
        };
        let len = 1 + self.rng.below(max) as usize;
        let data = self.rng.bytes(len);
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let pre = self.model.fs[&name].objs.clone();
        let synced = self.store.synced_txg();
        self.check(&format!("write {name} obj {id}"), ds.write(id, off, &data))?;
        let obj = self
            .model
            .fs
            .get_mut(&name)
            .unwrap()
            .objs
            .get_mut(&id)
            .unwrap();
        let end = off as usize + data.len();
        if obj.len() < end {
            obj.resize(end, 0);
        }
        obj[off as usize..end].copy_from_slice(&data);
        self.stats.writes += 1;
        self.note_change(&name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    pub(crate) fn truncate(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ids: Vec<u64> = self.model.fs[&name].objs.keys().copied().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let id = self.rng.pick(&ids);
        let size = self.rng.below(MAX_OFF + (32 << 10));
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let pre = self.model.fs[&name].objs.clone();
        let synced = self.store.synced_txg();
        self.check(&format!("truncate {name} obj {id}"), ds.truncate(id, size))?;
        let obj = self
            .model
            .fs
            .get_mut(&name)
            .unwrap()
            .objs
            .get_mut(&id)
            .unwrap();
        obj.resize(size as usize, 0);
        self.note_change(&name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    pub(crate) fn create_object(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        self.create_object_in(&name)
    }

    pub(crate) fn create_object_in(&mut self, name: &str) -> R<()> {
        if self.model.fs[name].objs.len() >= MAX_OBJECTS {
            return Ok(());
        }
        let ds = self.store.dataset(name).map_err(err("dataset"))?;
        let pre = self.model.fs[name].objs.clone();
        let synced = self.store.synced_txg();
        let what = format!("create object in {name}");
        let Some(id) = self.check(&what, ds.create_object())? else {
            return Ok(());
        };
        let objs = &mut self.model.fs.get_mut(name).unwrap().objs;
        if objs.contains_key(&id) {
            return Err(format!("{name}: object id {id} handed out while live"));
        }
        objs.insert(id, Vec::new());
        self.note_change(name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    pub(crate) fn delete_object(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ids: Vec<u64> = self.model.fs[&name].objs.keys().copied().collect();
        if ids.is_empty() {
            return Ok(());
        }
        let id = self.rng.pick(&ids);
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let pre = self.model.fs[&name].objs.clone();
        let synced = self.store.synced_txg();
        self.check(&format!("delete {name} obj {id}"), ds.delete_object(id))?;
        self.model.fs.get_mut(&name).unwrap().objs.remove(&id);
        self.note_change(&name, pre, self.store.synced_txg() > synced);
        Ok(())
    }

    /// Read a random range of a head or a snapshot and compare it with the model.
    pub(crate) fn read_check(&mut self) -> R<()> {
        if self.read_random(false)? == Some(true) {
            self.stats.reads += 1;
        }
        Ok(())
    }

    /// Read a random range of a head or a snapshot: `Some(true)` if it returned
    /// the model's bytes, `Some(false)` if it failed (only allowed with
    /// `damaged`, or after a power cut), `None` if there was nothing to read.
    /// Other bytes than the model's are always a finding.
    pub(crate) fn read_random(&mut self, damaged: bool) -> R<Option<bool>> {
        let name = self.rng.pick(&self.heads());
        let fs = &self.model.fs[&name];
        let (label, objs) = if !fs.snaps.is_empty() && self.rng.chance(30) {
            let (s, o) = self.rng.pick(&fs.snaps);
            (format!("{name}@{s}"), o)
        } else {
            (name.clone(), fs.objs.clone())
        };
        let ids: Vec<u64> = objs.keys().copied().collect();
        if ids.is_empty() {
            return Ok(None);
        }
        let id = self.rng.pick(&ids);
        let want = &objs[&id];
        let off = self.rng.below(want.len() as u64 + 4096);
        let len = 1 + self.rng.below(96 << 10) as usize;
        let got = if label.contains('@') {
            self.store.snapshot_dataset(&label)
        } else {
            self.store.dataset(&label)
        }
        .and_then(|ds| ds.read(id, off, len));
        let got = match got {
            Ok(g) => g,
            Err(_) if damaged => return Ok(Some(false)),
            Err(e) => {
                self.check::<()>(&format!("read {label} obj {id}"), Err(e))?;
                return Ok(Some(false));
            }
        };
        let s = (off as usize).min(want.len());
        let e = (off as usize + len).min(want.len());
        if got != want[s..e] {
            return Err(format!(
                "read {label} obj {id} [{off}+{len}]{}: {} bytes differ from the model ({} expected)",
                if damaged { " on overloaded devices" } else { "" },
                got.len(),
                e - s
            ));
        }
        Ok(Some(true))
    }

    pub(crate) fn fsync(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        let ds = self.store.dataset(&name).map_err(err("dataset"))?;
        let synced = self.store.synced_txg();
        if self.trace {
            eprintln!("  fsync {name}");
        }
        self.check(&format!("fsync {name}"), ds.fsync())?;
        self.stats.fsyncs += 1;
        if self.devs[0].is_cut() {
            return Ok(());
        }
        if self.store.synced_txg() > synced {
            self.mark_durable();
        } else {
            let h = self.hist.get_mut(&name).unwrap();
            h.1 = h.0.len() - 1;
        }
        Ok(())
    }

    // ------------------------------------------------------------------- commits

    /// Time passes; the engine commits if a commit is due (what its sync thread
    /// would do).
    pub(crate) fn tick(&mut self) -> R<()> {
        self.clock
            .advance(Duration::from_millis(self.rng.below(3000)));
        let r = self.check("step", self.store.step())?;
        if r.flatten().is_some() && !self.devs[0].is_cut() {
            self.stats.commits += 1;
            self.mark_durable();
        }
        Ok(())
    }

    pub(crate) fn sync(&mut self) -> R<()> {
        self.check("sync", self.store.sync())?;
        self.committed();
        Ok(())
    }

    /// A failed operation returned: durable only if it committed (a receive
    /// cut inside its BEGIN record fails before it creates anything, so it
    /// commits nothing; one cut later syncs as it discards its partial state).
    /// Marking an uncommitted state durable would let the model reject the
    /// older acknowledged states a later power cut legitimately brings back.
    pub(crate) fn committed_since(&mut self, synced: u64) {
        if self.store.synced_txg() > synced {
            self.committed();
        }
    }

    /// A catalog operation or sync returned: durable unless the power is cut.
    pub(crate) fn committed(&mut self) {
        if !self.devs[0].is_cut() {
            self.stats.commits += 1;
            self.mark_durable();
        }
    }
}
