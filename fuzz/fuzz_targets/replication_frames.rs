//! A replication peer's bytes: greeting and frames, whole and in pieces.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_replication::frame::fuzz_decode(data);
});
