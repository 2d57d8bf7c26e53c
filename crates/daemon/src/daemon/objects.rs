//! Object operations of the daemon (`obj.*`): create, list, write, read, size and
//! fsync objects of a dataset directly, below the POSIX layer. They exist for
//! tests and debugging (`cachalot debug ...`), not for clients.
//!
//! Invariants: a read is at most [`MAX_IO_LEN`] bytes and goes to the engine a
//! chunk at a time, keeping only a hash (and the bytes themselves up to
//! [`MAX_INLINE_READ`]); a pattern write makes its bytes a chunk at a time, so its
//! length costs no memory.

use super::{se, Daemon, OpResult, MAX_INLINE_READ, MAX_IO_LEN};
use crate::pattern;
use crate::proto::Args;
use serde_json::{json, Map, Value};

/// Bytes one step of an `obj.read` or pattern `obj.write` hands to the engine.
const IO_CHUNK: usize = 1 << 20;

impl Daemon {
    pub(super) fn obj_op(&self, op: &str, a: &Args) -> OpResult {
        let ds_name = a.str("ds")?;
        let store = self.ds_store(&ds_name)?;
        let ds = store.dataset(&ds_name).map_err(se)?;
        match op {
            "obj.create" => Ok(json!({ "obj": ds.create_object().map_err(se)? })),
            "obj.list" => Ok(json!({ "objects": ds.list_objects().map_err(se)? })),
            "obj.fsync" => {
                ds.fsync().map_err(se)?;
                Ok(json!({}))
            }
            "obj.size" => Ok(json!({ "size": ds.object_size(a.u64("obj")?).map_err(se)? })),
            "obj.delete" => {
                ds.delete_object(a.u64("obj")?).map_err(se)?;
                Ok(json!({}))
            }
            "obj.truncate" => {
                ds.truncate(a.u64("obj")?, a.u64("size")?).map_err(se)?;
                Ok(json!({}))
            }
            "obj.write" => {
                let obj = a.u64("obj")?;
                let off = a.opt_u64("off")?.unwrap_or(0);
                let src = WriteSource::from_args(a)?;
                let len = src.len();
                off.checked_add(len)
                    .ok_or_else(|| "offset + length overflows".to_string())?;
                let mut done = 0u64;
                let mut buf = Vec::new();
                while done < len {
                    let n = (len - done).min(IO_CHUNK as u64) as usize;
                    let chunk: &[u8] = match &src {
                        WriteSource::Bytes(b) => &b[done as usize..done as usize + n],
                        WriteSource::Pattern { seed, .. } => {
                            buf.resize(n, 0);
                            pattern::fill_pattern(*seed, off + done, &mut buf);
                            &buf
                        }
                    };
                    ds.write(obj, off + done, chunk).map_err(se)?;
                    done += n as u64;
                }
                Ok(json!({ "written": len }))
            }
            "obj.read" => {
                let obj = a.u64("obj")?;
                let off = a.opt_u64("off")?.unwrap_or(0);
                let len = a.u64("len")?;
                if len > MAX_IO_LEN {
                    return Err(format!("read length {len} exceeds the limit of 1G"));
                }
                off.checked_add(len)
                    .ok_or_else(|| "offset + length overflows".to_string())?;
                let check = a.opt_u64("check_seed")?;
                let mut hasher = blake3::Hasher::new();
                let mut small = Vec::new();
                let mut done = 0u64;
                let mut mismatch: Option<u64> = None;
                while done < len {
                    let n = (len - done).min(IO_CHUNK as u64) as usize;
                    let data = ds.read(obj, off + done, n).map_err(se)?;
                    if data.len() > n {
                        return Err("engine returned more data than asked".into());
                    }
                    hasher.update(&data);
                    if let (Some(seed), None) = (check, mismatch) {
                        mismatch = pattern::first_mismatch(seed, off + done, &data)
                            .map(|p| off + done + p as u64);
                    }
                    if len as usize <= MAX_INLINE_READ {
                        small.extend_from_slice(&data);
                    }
                    done += data.len() as u64;
                    if data.len() < n {
                        break;
                    }
                }
                let mut out = Map::new();
                out.insert("len".into(), json!(done));
                out.insert(
                    "blake3".into(),
                    json!(hasher.finalize().to_hex().to_string()),
                );
                if len as usize <= MAX_INLINE_READ {
                    out.insert("data_hex".into(), json!(pattern::to_hex(&small)));
                }
                if check.is_some() {
                    out.insert("pattern_ok".into(), json!(mismatch.is_none()));
                    out.insert("first_mismatch".into(), json!(mismatch));
                }
                Ok(Value::Object(out))
            }
            other => Err(format!("unknown operation '{other}'")),
        }
    }
}

/// Data of an `obj.write`.
enum WriteSource {
    Bytes(Vec<u8>),
    Pattern { seed: u64, len: u64 },
}

impl WriteSource {
    fn from_args(a: &Args) -> Result<WriteSource, String> {
        let b64 = a.opt_str("data_b64")?;
        let hex = a.opt_str("data_hex")?;
        let pat = a.value("pattern");
        let given = b64.is_some() as u8 + hex.is_some() as u8 + pat.is_some() as u8;
        if given != 1 {
            return Err("obj.write: give exactly one of data_b64, data_hex, pattern".into());
        }
        if let Some(s) = b64 {
            return Ok(WriteSource::Bytes(pattern::from_base64(&s)?));
        }
        if let Some(s) = hex {
            return Ok(WriteSource::Bytes(pattern::from_hex(&s)?));
        }
        let p = Args::new(
            "obj.write pattern",
            pat.unwrap_or(&Value::Null),
            &["seed", "len"],
        )?;
        let len = p.u64("len")?;
        if len > MAX_IO_LEN {
            return Err(format!("pattern length {len} exceeds the limit of 1G"));
        }
        Ok(WriteSource::Pattern {
            seed: p.u64("seed")?,
            len,
        })
    }

    fn len(&self) -> u64 {
        match self {
            WriteSource::Bytes(b) => b.len() as u64,
            WriteSource::Pattern { len, .. } => *len,
        }
    }
}
