//! Fuzz targets for every decoder of untrusted on-disk bytes in the engine: one
//! `pub fn NAME(data: &[u8])` per target that must never panic, whatever `data`
//! holds. `fuzz/fuzz_targets/NAME.rs` (cargo-fuzz, nightly) and the stable-toolchain
//! runner (`tests/stable.rs`, part of `make test`) call the same functions.
//!
//! Where a decoder checks a checksum first, the target repairs the checksum (and
//! identity fields) of its input, so the fuzzer's bytes reach the parsing code
//! behind it instead of stopping at the checksum.
//!
//! Invariants checked beyond "no panic": what decodes re-encodes to the same value.

mod env;
mod stream;

pub use stream::{send_stream, send_stream_records};

use cachalot_objects::dnode::{self, DnodePhys, DNODE_SIZE, INDIRECT_SIZE};
use cachalot_objects::{zil, ObjectInfo};
use cachalot_pool::blkptr::BLKPTR_SIZE;
use cachalot_pool::{label, spacemap, BlkPtr, Uberblock};
use cachalot_posix::dir;
use cachalot_posix::objio::ObjRead;

/// A fuzz target: takes any bytes, must not panic.
pub type Target = fn(&[u8]);

/// Every target, by name, for runners.
pub const TARGETS: &[(&str, Target)] = &[
    ("label", label),
    ("uberblock", uberblock),
    ("blkptr", blkptr),
    ("spacemap_block", spacemap_block),
    ("dnode", dnode),
    ("indirect_block", indirect_block),
    ("l2arc_header", l2arc_header),
    ("intent_log_block", intent_log_block),
    ("directory", directory),
    ("xattrs", xattrs),
    ("send_stream", send_stream),
    ("send_stream_records", send_stream_records),
];

/// A vdev label header (the pool configuration as JSON behind a checksum; the
/// checksum is made valid so the JSON reaches the parser).
pub fn label(data: &[u8]) {
    let _ = label::decode_header(data);
    let mut b = data.to_vec();
    if b.len() >= 48 {
        let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
        if let Some(json) = b.get(48..48usize.saturating_add(len)) {
            let sum = *blake3::hash(json).as_bytes();
            b[16..48].copy_from_slice(&sum);
        }
    }
    if let Some(h) = label::decode_header(&b) {
        let again = label::decode_header(&label::encode_header(&h)).expect("re-decodes");
        assert_eq!(again.config.guid, h.config.guid);
    }
}

/// An uberblock slot (its checksum made valid).
pub fn uberblock(data: &[u8]) {
    let _ = Uberblock::decode(data);
    let mut b = data.to_vec();
    if b.len() >= 512 {
        let sum = *blake3::hash(&b[0..480]).as_bytes();
        b[480..512].copy_from_slice(&sum);
    }
    if let Some(ub) = Uberblock::decode(&b) {
        assert_eq!(Uberblock::decode(&ub.encode()), Some(ub));
    }
}

/// A block pointer (128 bytes; any length is offered).
pub fn blkptr(data: &[u8]) {
    if let Some(bp) = BlkPtr::decode(data) {
        assert_eq!(BlkPtr::decode(&bp.to_bytes()), Some(bp));
    }
}

/// A space map block: header, predecessor pointer, records.
pub fn spacemap_block(data: &[u8]) {
    let _ = spacemap::decode_block(data);
}

/// A dnode, and an object set root block.
pub fn dnode(data: &[u8]) {
    if let Some(d) = DnodePhys::decode(data) {
        let mut out = [0u8; DNODE_SIZE];
        d.encode(&mut out);
        let _ = DnodePhys::decode(&out).expect("re-decodes");
    }
    let _ = dnode::decode_objset(data);
}

/// An indirect block: an array of block pointers (the input is padded or cut to
/// the indirect block size).
pub fn indirect_block(data: &[u8]) {
    let mut block = data.to_vec();
    block.resize(INDIRECT_SIZE, 0);
    for c in block.chunks(BLKPTR_SIZE) {
        blkptr(c);
    }
    let _ = cachalot_objects::objset::decode_indirect(&block);
}

/// A cache device's batch header (the L2ARC's log block), its checksum made valid.
pub fn l2arc_header(data: &[u8]) {
    cachalot_objects::l2arc::fuzz_batch_header(data);
}

/// Magic of intent-log blocks (`objects/src/zil/format.rs`).
const ZIL_MAGIC: u64 = 0x0031_435a_4843_4143;

/// An intent-log block, with magic, guid, sequence and checksum made valid so
/// the record parser runs on the fuzzer's bytes.
pub fn intent_log_block(data: &[u8]) {
    let (guid, seq) = (7u64, 3u64);
    let mut b = data.to_vec();
    if b.len() < zil::BLOCK_HEADER {
        let _ = zil::decode_block(&b, guid, seq);
        return;
    }
    b[0..8].copy_from_slice(&ZIL_MAGIC.to_le_bytes());
    b[8..16].copy_from_slice(&guid.to_le_bytes());
    b[16..24].copy_from_slice(&seq.to_le_bytes());
    let used = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    if (zil::BLOCK_HEADER..=b.len()).contains(&used) {
        let mut h = blake3::Hasher::new();
        h.update(&b[0..64]);
        h.update(&b[96..used]);
        b[64..96].copy_from_slice(h.finalize().as_bytes());
    }
    if let Some(d) = zil::decode_block(&b, guid, seq) {
        // What decodes re-encodes to the same records (every record type, the
        // group flag, the bounded lengths).
        let again = zil::encode_records(&d.records);
        let back = zil::decode_records(&again, d.records.len()).expect("re-decodes");
        assert_eq!(back, d.records);
    }
    if b.len() >= zil::ZilHeader::SIZE {
        let _ = zil::ZilHeader::decode(&b[..zil::ZilHeader::SIZE]);
    }
}

/// Bytes of a directory's front (header at 0, hash table at `dir::TABLE_OFF`) in
/// a fuzz input; the rest of the input is the bucket area at `dir::BUCKET_BASE`.
pub const DIR_FRONT: usize = 8192;

/// A directory object made of a fuzz input (see `DIR_FRONT`); bytes not given
/// read as zeros, as in a sparse object.
struct DirObject<'a> {
    front: &'a [u8],
    buckets: &'a [u8],
}

fn copy_range(src: &[u8], off: u64, out: &mut [u8]) {
    let start = off.min(src.len() as u64) as usize;
    let n = src.len().saturating_sub(start).min(out.len());
    out[..n].copy_from_slice(&src[start..start + n]);
}

impl ObjRead for DirObject<'_> {
    fn read(&self, _obj: u64, off: u64, len: usize) -> cachalot_posix::Result<Vec<u8>> {
        // A length from the fuzzer's bytes reaching an allocation unbounded is a bug.
        assert!(len <= 1 << 26, "directory code asked to read {len} bytes");
        let mut out = vec![0u8; len];
        if off >= dir::BUCKET_BASE {
            copy_range(self.buckets, off - dir::BUCKET_BASE, &mut out);
        } else {
            copy_range(self.front, off, &mut out);
        }
        Ok(out)
    }
    fn info(&self, obj: u64) -> cachalot_posix::Result<ObjectInfo> {
        Ok(ObjectInfo {
            id: obj,
            otype: 0,
            blksz: 16384,
            size: dir::BUCKET_BASE + self.buckets.len() as u64,
            gen: 1,
            bonus: [0; dnode::BONUS_SIZE],
        })
    }
}

/// A directory object (extendible hash: header, table, buckets): count, a full
/// readdir, and lookups of names found and not found.
pub fn directory(data: &[u8]) {
    let split = data.len().min(DIR_FRONT);
    let d = DirObject {
        front: &data[..split],
        buckets: &data[split..],
    };
    let _ = dir::count(&d, 1);
    let mut cookie = 0;
    for _ in 0..64 {
        match dir::readdir(&d, 1, cookie, 64) {
            Ok(v) if !v.is_empty() => {
                for e in &v {
                    let _ = dir::lookup(&d, 1, &e.name);
                }
                let next = v.last().unwrap().key;
                if next <= cookie {
                    break;
                }
                cookie = next;
            }
            _ => break,
        }
    }
    for name in [&b"a"[..], b"file", b"\xff\xfe"] {
        let _ = dir::lookup(&d, 1, name);
    }
}

/// The xattr object of a file in a real (simulated-device) file system, replaced
/// by the fuzzer's bytes, then listed and read.
pub fn xattrs(data: &[u8]) {
    env::with_env(|e| e.xattrs(data));
}
