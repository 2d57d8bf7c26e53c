//! Writes the seed corpus of every fuzz target into `fuzz/corpus/NAME/` from a
//! real pool on a simulated device: labels, uberblocks, pointers, space map,
//! dnode, indirect and intent-log blocks, a directory, an xattr object and send
//! streams. Run when a format changes:
//!   cargo test --profile ci -p cachalot-fuzzing --test corpus -- --ignored

use cachalot_datasets::{DatasetKind, Store, StoreOpts};
use cachalot_objects::traverse;
use cachalot_pool::{label, BlkPtr, BlockDevice, BlockType, SimDevice};
use cachalot_posix::{Caller, Fs};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
#[ignore]
fn write_corpus() {
    let dev = SimDevice::new("d0", 64 << 20);
    let opts = StoreOpts {
        arc_max: 16 << 20,
        txg_timeout: Duration::from_secs(3600),
        dirty_max: 1 << 30,
    };
    let devs: Vec<Arc<dyn BlockDevice>> = vec![Arc::new(dev.clone())];
    let store = Store::create_on_devices("tank", devs, false, opts).unwrap();
    store
        .create_dataset("tank/fs", DatasetKind::Filesystem, None, &[], false)
        .unwrap();
    let ds = store.dataset("tank/fs").unwrap();
    let fs = Fs::mount(store.clone(), ds.clone()).unwrap();
    let root = fs.root();
    let mut file = 0;
    for (i, n) in ["a", "file", "longer-name-of-a-file", "d"]
        .iter()
        .enumerate()
    {
        let a = if i == 3 {
            fs.mkdir(root, n.as_bytes(), 0o755, Caller::ROOT).unwrap()
        } else {
            fs.mknod(root, n.as_bytes(), 0o100644, 0, Caller::ROOT)
                .unwrap()
        };
        file = if i == 1 { a.ino } else { file };
    }
    fs.setxattr(file, b"user.a", b"value", 0).unwrap();
    fs.setxattr(file, b"user.long", &[7u8; 300], 0).unwrap();
    // A big file so its object has indirect blocks.
    let big = fs
        .mknod(root, b"big", 0o100644, 0, Caller::ROOT)
        .unwrap()
        .ino;
    ds.write(big, 0, &vec![0x5a; 200 << 10]).unwrap();
    store.sync().unwrap();
    // The intent log: a write made durable by fsync alone.
    // (The first fsync of a dataset commits a txg to record the log's header;
    // the next ones write log blocks.)
    // Namespace changes are logged as groups (create, bonus, write, delete).
    for round in 0..3u64 {
        ds.write(file, round * 100, b"logged").unwrap();
        ds.truncate(big, (200 << 10) - round).unwrap();
        let name = format!("logged-{round}");
        fs.mknod(root, name.as_bytes(), 0o100644, 0, Caller::ROOT)
            .unwrap();
        fs.rename(
            root,
            name.as_bytes(),
            root,
            b"renamed",
            cachalot_posix::RenameMode::Replace,
        )
        .unwrap();
        ds.punch(big, 0, 16384).unwrap();
        ds.fsync().unwrap();
    }
    let mut n = 0;
    for dva in ds.objset().zil().blocks() {
        let b = store.pool().read_log_block_raw(&dva).unwrap();
        if b.iter().any(|x| *x != 0) {
            put("intent_log_block", &format!("log{n}"), &b);
            n += 1;
        }
    }
    assert!(n > 0, "no intent-log block was written");
    // Front (header, table), then the buckets: the layout `directory` reads.
    let size = ds.object_size(root).unwrap();
    let base = cachalot_posix::dir::BUCKET_BASE;
    let mut dir = ds.read(root, 0, cachalot_fuzzing::DIR_FRONT).unwrap();
    dir.extend(ds.read(root, base, (size - base) as usize).unwrap());
    put("directory", "root", &dir);
    let xobj = u64::from_le_bytes(
        ds.object_info(file).unwrap().bonus[112..120]
            .try_into()
            .unwrap(),
    );
    let xsize = ds.object_size(xobj).unwrap();
    put("xattrs", "two", &ds.read(xobj, 0, xsize as usize).unwrap());

    let pool = store.pool();
    let ub = pool.uberblock();
    put("uberblock", "ub", &ub.encode());
    put("blkptr", "mos", &ub.mos.to_bytes());
    put("blkptr", "hole", &BlkPtr::HOLE.to_bytes());
    let hdr = cachalot_pool::pool::read_label(&dev).unwrap();
    put("label", "header", &label::encode_header(&hdr));
    for (i, bp) in pool.spacemap_blocks().unwrap().iter().take(2).enumerate() {
        put(
            "spacemap_block",
            &format!("sm{i}"),
            &pool.read_block(bp).unwrap(),
        );
    }
    // Dnode and indirect blocks of the dataset's tree.
    let (mut dnode, mut indirect) = (None, None);
    traverse(store.cache(), &ds.objset().root_bp(), &mut |bp| {
        if bp.block_type == BlockType::Dnode && dnode.is_none() {
            dnode = Some(*bp);
        }
        if bp.level > 0 && indirect.is_none() {
            indirect = Some(*bp);
        }
        true
    })
    .unwrap();
    let dblock = pool.read_block(&dnode.unwrap()).unwrap();
    put("dnode", "dnode", &dblock[..512]);
    put(
        "dnode",
        "objset",
        &pool.read_block(&ds.objset().root_bp()).unwrap(),
    );
    put(
        "indirect_block",
        "l1",
        &pool.read_block(&indirect.unwrap()).unwrap(),
    );

    store.snapshot(&["tank/fs@s".to_string()]).unwrap();
    let mut stream = Vec::new();
    store
        .send("tank/fs@s", None, &mut stream, &mut |_| {})
        .unwrap();
    put("send_stream", "full", &stream);
    // The same records in send_stream_records' form: [type-2][len u16][payload].
    let mut recs = Vec::new();
    let mut p = 0;
    while p + 8 <= stream.len() {
        let ty = stream[p];
        let len = u32::from_le_bytes(stream[p + 4..p + 8].try_into().unwrap()) as usize;
        let payload = &stream[p + 8..p + 8 + len];
        if (2..=5).contains(&ty) && len < 4096 {
            recs.push(ty - 2);
            recs.extend_from_slice(&(len as u16).to_le_bytes());
            recs.extend_from_slice(payload);
        }
        p += 8 + len + 32;
    }
    put("send_stream_records", "records", &recs);
}
