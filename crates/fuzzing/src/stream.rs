//! Send-stream targets: receive the fuzzer's bytes as they are (the framing,
//! record checksums and BEGIN), and receive a stream built from them whose
//! framing, checksums, BEGIN and END are valid, so the record payloads (OBJECT,
//! WRITE, FREE, FREEOBJECT) reach the code that applies them.

use crate::env::with_env;

/// Receive `data` as a full stream into `fz/recv` (replacing it).
pub fn send_stream(data: &[u8]) {
    receive(data);
}

/// Build a stream from `data` read as records `[type u8][len u16 LE][payload]`
/// (types 2..=5; BEGIN first and END last are added), then receive it.
pub fn send_stream_records(data: &[u8]) {
    let begin = serde_json::json!({
        "magic": "CACHALOT-STREAM", "version": 1, "snapshot": "fz/src@s",
        "guid": 99, "txg": 5, "from_guid": 0, "kind": "filesystem",
        "recordsize": 4096, "volblocksize": null,
    });
    let mut f = Framer::default();
    f.put(1, begin.to_string().as_bytes());
    let mut rest = data;
    while rest.len() >= 3 {
        let ty = 2 + rest[0] % 4;
        let len = (u16::from_le_bytes([rest[1], rest[2]]) as usize).min(rest.len() - 3);
        f.put(ty, &rest[3..3 + len]);
        rest = &rest[3 + len..];
    }
    // END: the record count (END included) and the running hash before it.
    let mut end = (f.records + 1).to_le_bytes().to_vec();
    end.extend_from_slice(f.running.finalize().as_bytes());
    f.put(6, &end);
    receive(&f.out);
}

/// Frames records as the sender does: header, payload, checksum; keeps the
/// running hash of the checksums.
#[derive(Default)]
struct Framer {
    out: Vec<u8>,
    running: blake3::Hasher,
    records: u64,
}

impl Framer {
    fn put(&mut self, ty: u8, payload: &[u8]) {
        let mut header = [0u8; 8];
        header[0] = ty;
        header[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        let mut h = blake3::Hasher::new();
        h.update(&header);
        h.update(payload);
        let sum = *h.finalize().as_bytes();
        self.out.extend_from_slice(&header);
        self.out.extend_from_slice(payload);
        self.out.extend_from_slice(&sum);
        self.running.update(&sum);
        self.records += 1;
    }
}

fn receive(stream: &[u8]) {
    with_env(|e| {
        let mut input = stream;
        let r = e.store.receive("fz/recv", &mut input, true, &mut |_| {});
        if std::env::var("CACHALOT_FUZZ_DEBUG").is_ok() {
            eprintln!("receive: {r:?}");
        }
    });
}
