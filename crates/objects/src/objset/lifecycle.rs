//! Objects created, deleted, received with given attributes, and re-created by
//! intent-log replay; their attributes and the list of live objects.
//!
//! Invariants:
//! - An object id is reused only after the sync that freed its dnode.
//! - Id 0 and type 0 are reserved; block sizes are powers of two within
//!   `MIN_BLOCK..=MAX_BLOCK`. Bad attributes are refused before anything changes.

use super::{ObjError, ObjState, ObjectInfo, ObjectSet, Result};
use crate::dnode::*;
use cachalot_pool::BlkPtr;

impl ObjectSet {
    /// Create an object of type `otype` (non-zero). Returns its id.
    pub fn create_object(&self, otype: u8) -> Result<u64> {
        if otype == 0 {
            return Err(ObjError::Invalid("object type 0 is reserved".into()));
        }
        let mut inner = self.inner.lock();
        let mut id = inner.next_id_hint.max(1);
        loop {
            if !inner.objects.contains_key(&id) && self.read_dnode(&inner.meta, id)?.is_free() {
                break;
            }
            id += 1;
        }
        inner.next_id_hint = id + 1;
        let gen = inner.open_txg;
        let mut st = ObjState::from_phys(DnodePhys::empty());
        st.otype = otype;
        st.gen = gen;
        st.blksz = MIN_BLOCK;
        st.dirty = true;
        inner.objects.insert(id, st);
        Ok(id)
    }

    /// Delete an object and free its blocks at the next sync.
    pub fn delete_object(&self, id: u64) -> Result<()> {
        let mut inner = self.inner.lock();
        let st = self.load(&mut inner, id)?;
        let dropped = st.drop_records();
        st.deleted = true;
        st.dirty = true;
        st.size = 0;
        inner.dirty_bytes -= dropped;
        self.readahead.lock().forget(id);
        if id < inner.next_id_hint {
            // The id becomes reusable after the sync; scanning from it is cheap.
            inner.next_id_hint = id;
        }
        Ok(())
    }

    pub fn info(&self, id: u64) -> Result<ObjectInfo> {
        let mut inner = self.inner.lock();
        Ok(self.load(&mut inner, id)?.info(id))
    }

    pub fn exists(&self, id: u64) -> bool {
        self.info(id).is_ok()
    }

    /// Create an object of type `otype` whose records are `blksz` bytes from the
    /// start (a volume: its volblocksize), instead of growing from the minimum.
    pub fn create_object_sized(&self, otype: u8, blksz: u32) -> Result<u64> {
        if !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz) || !blksz.is_power_of_two() {
            return Err(ObjError::Invalid(format!("invalid block size {blksz}")));
        }
        let id = self.create_object(otype)?;
        let mut inner = self.inner.lock();
        inner.objects.get_mut(&id).unwrap().blksz = blksz;
        Ok(id)
    }

    /// The last synced tree root of object `id`: equal roots mean equal content.
    pub fn object_root(&self, id: u64) -> Result<BlkPtr> {
        let mut inner = self.inner.lock();
        Ok(self.load(&mut inner, id)?.phys.root)
    }

    /// Make object `id` exist with exactly these attributes (receive keeps object
    /// ids, which the layers above use as identities). A block size change drops
    /// the object's data first; a smaller size truncates.
    pub fn recv_object(
        &self,
        id: u64,
        otype: u8,
        blksz: u32,
        size: u64,
        bonus: &[u8],
    ) -> Result<()> {
        if id == 0
            || otype == 0
            || !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz)
            || !blksz.is_power_of_two()
            || bonus.len() > BONUS_SIZE
        {
            return Err(ObjError::Invalid(format!(
                "object {id}: invalid attributes in stream"
            )));
        }
        let exists = self.info(id).is_ok();
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if !exists {
            if inner.objects.get(&id).is_some_and(|o| o.deleted) {
                return Err(ObjError::Invalid(format!(
                    "object {id} is deleted and recreated in one stream"
                )));
            }
            let mut st = ObjState::from_phys(DnodePhys::empty());
            st.gen = inner.open_txg;
            inner.objects.insert(id, st);
        }
        let st = inner.objects.get_mut(&id).unwrap();
        if st.blksz != blksz {
            inner.dirty_bytes -= st.drop_records();
            st.size = 0;
            st.blksz = blksz;
        }
        st.otype = otype;
        st.bonus = [0; BONUS_SIZE];
        st.bonus[..bonus.len()].copy_from_slice(bonus);
        st.dirty = true;
        drop(guard);
        self.truncate(id, size)
    }

    pub fn set_bonus(&self, id: u64, bonus: &[u8]) -> Result<()> {
        if bonus.len() > BONUS_SIZE {
            return Err(ObjError::Invalid("bonus too large".into()));
        }
        let mut inner = self.inner.lock();
        let st = self.load(&mut inner, id)?;
        st.bonus = [0; BONUS_SIZE];
        st.bonus[..bonus.len()].copy_from_slice(bonus);
        st.dirty = true;
        Ok(())
    }

    /// Ids of all live objects (synced or created since).
    pub fn list_objects(&self) -> Result<Vec<u64>> {
        let inner = self.inner.lock();
        let max_synced = inner.meta.size / DNODE_SIZE as u64;
        let mut ids: Vec<u64> = Vec::new();
        for id in 1..max_synced {
            if let Some(st) = inner.objects.get(&id) {
                if !st.deleted {
                    ids.push(id);
                }
            } else if !self.read_dnode(&inner.meta, id)?.is_free() {
                ids.push(id);
            }
        }
        for (id, st) in &inner.objects {
            if *id >= max_synced.max(1) && !st.deleted {
                ids.push(*id);
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Replay of a logged creation: object `id` exists from now on, empty, with
    /// these attributes, whatever had the id before (a live object of the
    /// committed tree, or one deleted earlier in the replay, whose blocks the next
    /// sync frees as it frees a truncated object's). Never used outside replay:
    /// the normal path picks free ids (`create_object`).
    pub fn create_object_at(&self, id: u64, otype: u8, blksz: u32, gen: u64) -> Result<()> {
        if id == 0
            || otype == 0
            || !(MIN_BLOCK..=MAX_BLOCK).contains(&blksz)
            || !blksz.is_power_of_two()
        {
            return Err(ObjError::Invalid(format!(
                "object {id}: invalid attributes in the intent log"
            )));
        }
        let mut guard = self.inner.lock();
        let inner = &mut *guard;
        if !inner.objects.contains_key(&id) {
            let phys = self.read_dnode(&inner.meta, id)?;
            let fresh = phys.is_free();
            inner.objects.insert(id, ObjState::from_phys(phys));
            if fresh {
                let st = inner.objects.get_mut(&id).unwrap();
                st.otype = otype;
                st.blksz = blksz;
                st.gen = gen;
                st.dirty = true;
                return Ok(());
            }
        }
        let st = inner.objects.get_mut(&id).unwrap();
        // Everything of the old object goes: its records (free_from 0) and,
        // through the block-size rule of `sync`, any tree of another block size.
        inner.dirty_bytes -= st.drop_records();
        st.deleted = false;
        st.otype = otype;
        st.blksz = blksz;
        st.gen = gen;
        st.size = 0;
        st.bonus = [0; BONUS_SIZE];
        st.dirty = true;
        Ok(())
    }
}
