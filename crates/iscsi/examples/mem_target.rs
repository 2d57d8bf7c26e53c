//! A target serving one in-memory disk: `mem_target ADDR SIZE_MIB [CHAP_USER CHAP_SECRET]`.
//! For trying the protocol layer alone (conformance runs use the daemon).

use cachalot_iscsi::{target_name, Catalog, Chap, Export, MemDev, Target};
use std::sync::Arc;

struct One(Export);

impl Catalog for One {
    fn targets(&self) -> Vec<String> {
        vec![self.0.target.clone()]
    }
    fn export(&self, t: &str) -> Option<Export> {
        (t == self.0.target).then(|| self.0.clone())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).map(String::as_str).unwrap_or("127.0.0.1:3260");
    let mib: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(128);
    let chap = match (args.get(3), args.get(4)) {
        (Some(u), Some(s)) => Some(Chap {
            user: u.clone(),
            secret: s.clone(),
            mutual: None,
        }),
        _ => None,
    };
    let exp = Export {
        target: target_name("mem/disk"),
        volume: "mem/disk".into(),
        dev: Arc::new(MemDev::new("mem/disk", mib << 20, 8192, false)),
        chap,
        pr_path: None,
    };
    let t = Target::new(Arc::new(One(exp)));
    let l = std::net::TcpListener::bind(addr).expect("bind");
    eprintln!(
        "serving {} on {}",
        target_name("mem/disk"),
        l.local_addr().unwrap()
    );
    t.serve(l).expect("serve");
}
