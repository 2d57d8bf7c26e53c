//! Catalog steps: snapshots, their destruction, clones, rollbacks, and full
//! and incremental send/receive (some streams cut short, which must change
//! nothing).

use crate::{Fs, Objs, Sim, MAX_DATASETS, MAX_SNAPS, R};

impl Sim {
    // ----------------------------------------------------------------- snapshots

    pub(crate) fn snapshot(&mut self) -> R<()> {
        let cands: Vec<String> = self
            .heads()
            .into_iter()
            .filter(|n| !self.recv_src.contains_key(n))
            .collect();
        let name = self.rng.pick(&cands);
        if self.model.fs[&name].snaps.len() >= MAX_SNAPS {
            return self.destroy_snapshot_of(&name);
        }
        let snap = self.new_name("s");
        let full = format!("{name}@{snap}");
        if self.trace {
            eprintln!("  snapshot {full}");
        }
        self.check(&full, self.store.snapshot(std::slice::from_ref(&full)))?;
        let fs = self.model.fs.get_mut(&name).unwrap();
        let objs = fs.objs.clone();
        fs.snaps.push((snap, objs));
        self.stats.snapshots += 1;
        self.committed();
        Ok(())
    }

    pub(crate) fn destroy_snapshot(&mut self) -> R<()> {
        let name = self.rng.pick(&self.heads());
        self.destroy_snapshot_of(&name)
    }

    /// Destroy the oldest snapshot of `name` that nothing depends on.
    pub(crate) fn destroy_snapshot_of(&mut self, name: &str) -> R<()> {
        if self.recv_src.contains_key(name) {
            return Ok(());
        }
        let Some(idx) = self.model.fs[name]
            .snaps
            .iter()
            .position(|(s, _)| !self.pinned.contains(&format!("{name}@{s}")))
        else {
            return Ok(());
        };
        let snap = self.model.fs[name].snaps[idx].0.clone();
        let full = format!("{name}@{snap}");
        self.check(
            &format!("destroy {full}"),
            self.store.destroy_snapshot(&full),
        )?;
        self.model.fs.get_mut(name).unwrap().snaps.remove(idx);
        self.committed();
        Ok(())
    }

    pub(crate) fn clone_snapshot(&mut self) -> R<()> {
        if self.model.fs.len() >= MAX_DATASETS {
            return Ok(());
        }
        let Some((name, snap, objs)) = self.pick_snapshot() else {
            return Ok(());
        };
        let full = format!("{name}@{snap}");
        let new = format!("tank/{}", self.new_name("c"));
        let r = self.store.clone_snapshot(&full, &new, &[]);
        self.check(&format!("clone {full} {new}"), r)?;
        self.pinned.insert(full);
        self.model.fs.insert(
            new,
            Fs {
                objs,
                snaps: vec![],
            },
        );
        self.stats.clones += 1;
        self.committed();
        Ok(())
    }

    /// A random snapshot of a dataset that is not a receive target.
    pub(crate) fn pick_snapshot(&mut self) -> Option<(String, String, Objs)> {
        let all: Vec<(String, String, Objs)> = self
            .model
            .fs
            .iter()
            .filter(|(n, _)| !self.recv_src.contains_key(*n))
            .flat_map(|(n, f)| {
                f.snaps
                    .iter()
                    .map(move |(s, o)| (n.clone(), s.clone(), o.clone()))
            })
            .collect();
        (!all.is_empty()).then(|| self.rng.pick(&all))
    }

    /// Roll a dataset back to its newest snapshot.
    pub(crate) fn rollback(&mut self) -> R<()> {
        let cands: Vec<String> = self
            .model
            .fs
            .iter()
            .filter(|(n, f)| !f.snaps.is_empty() && !self.recv_src.contains_key(*n))
            .map(|(n, _)| n.clone())
            .collect();
        if cands.is_empty() {
            return Ok(());
        }
        let name = self.rng.pick(&cands);
        let (snap, objs) = self.model.fs[&name].snaps.last().unwrap().clone();
        let full = format!("{name}@{snap}");
        self.check(
            &format!("rollback {full}"),
            self.store.rollback(&full, false),
        )?;
        let pre = self.model.fs[&name].objs.clone();
        self.model.fs.get_mut(&name).unwrap().objs = objs;
        // Interrupted, the rollback may or may not have landed.
        self.note_change(&name, pre, false);
        self.stats.rollbacks += 1;
        self.committed();
        Ok(())
    }

    // ---------------------------------------------------------- send and receive

    /// Send a snapshot into a new dataset, or the next snapshot of a source into
    /// a dataset that received an older one; sometimes the stream is cut short,
    /// which must fail and change nothing.
    pub(crate) fn send_receive(&mut self) -> R<()> {
        let incr: Vec<(String, String, String, String)> = self
            .recv_src
            .iter()
            .filter_map(|(r, src)| {
                let base = self.model.fs.get(r)?.snaps.last()?.0.clone();
                let sf = self.model.fs.get(src)?;
                let bi = sf.snaps.iter().position(|(s, _)| *s == base)?;
                let next = sf.snaps.get(bi + 1)?.0.clone();
                Some((r.clone(), src.clone(), base, next))
            })
            .collect();
        if !incr.is_empty() && self.rng.chance(50) {
            let (r, src, base, next) = self.rng.pick(&incr);
            return self.receive_incremental(&r, &src, &base, &next);
        }
        if self.model.fs.len() >= MAX_DATASETS {
            return Ok(());
        }
        let Some((name, snap, objs)) = self.pick_snapshot() else {
            return Ok(());
        };
        let full = format!("{name}@{snap}");
        let mut buf = Vec::new();
        let r = self.store.send(&full, None, &mut buf, &mut |_| {});
        if self.check(&format!("send {full}"), r)?.is_none() {
            return Ok(());
        }
        self.stats.sends += 1;
        let target = format!("tank/{}", self.new_name("r"));
        if self.rng.chance(20) {
            let cut = self.rng.below(buf.len() as u64) as usize;
            let synced = self.store.synced_txg();
            if self
                .store
                .receive(&target, &mut &buf[..cut], false, &mut |_| {})
                .is_ok()
            {
                return Err(format!(
                    "receive of {full} cut at {cut} of {} bytes succeeded",
                    buf.len()
                ));
            }
            self.stats.cut_streams += 1;
            if self.trace {
                eprintln!(
                    "  receive {full} into {target} cut at {cut} of {}",
                    buf.len()
                );
            }
            if self.devs[0].is_cut() {
                return Ok(());
            }
            // Nothing may be left.
            self.committed_since(synced);
            return self.check_catalog("after a cut stream");
        }
        let r = self
            .store
            .receive(&target, &mut &buf[..], false, &mut |_| {});
        self.check(&format!("receive {full} into {target}"), r)?;
        self.pinned.insert(full);
        self.recv_src.insert(target.clone(), name);
        self.model.fs.insert(
            target,
            Fs {
                objs: objs.clone(),
                snaps: vec![(snap, objs)],
            },
        );
        self.committed();
        Ok(())
    }

    pub(crate) fn receive_incremental(
        &mut self,
        r: &str,
        src: &str,
        base: &str,
        next: &str,
    ) -> R<()> {
        let full = format!("{src}@{next}");
        let mut buf = Vec::new();
        let sent = self
            .store
            .send(&full, Some(&format!("@{base}")), &mut buf, &mut |_| {});
        if self
            .check(&format!("send -i @{base} {full}"), sent)?
            .is_none()
        {
            return Ok(());
        }
        self.stats.sends += 1;
        let fs = &self.model.fs[r];
        let changed = fs.snaps.last().map(|(_, o)| o) != Some(&fs.objs) || self.touched.contains(r);
        if !changed && self.rng.chance(25) {
            // A cut incremental stream onto an existing dataset leaves it as it was.
            let cut = self.rng.below(buf.len() as u64) as usize;
            let synced = self.store.synced_txg();
            if self
                .store
                .receive(r, &mut &buf[..cut], false, &mut |_| {})
                .is_ok()
            {
                return Err(format!(
                    "incremental receive into {r} cut at {cut} succeeded"
                ));
            }
            self.stats.cut_streams += 1;
            if self.devs[0].is_cut() {
                return Ok(());
            }
            self.committed_since(synced);
            return self.check_fs(r, "after a cut incremental stream");
        }
        let objs = self.model.fs[src]
            .snaps
            .iter()
            .find(|(s, _)| s == next)
            .unwrap()
            .1
            .clone();
        let mut pre = self.model.fs[r].objs.clone();
        if changed {
            // A forced receive first rolls the target back to the base (a
            // state a power cut may leave).
            let base_objs = self.model.fs[r].snaps.last().unwrap().1.clone();
            self.model.fs.get_mut(r).unwrap().objs = base_objs.clone();
            self.note_change(r, pre, false);
            pre = base_objs;
        }
        let res = self.store.receive(r, &mut &buf[..], changed, &mut |_| {});
        self.check(&format!("receive -i {full} into {r}"), res)?;
        let fs = self.model.fs.get_mut(r).unwrap();
        fs.objs = objs.clone();
        fs.snaps.push((next.to_string(), objs));
        self.pinned.insert(full);
        self.note_change(r, pre, false);
        self.touched.remove(r);
        self.committed();
        Ok(())
    }
}
