//! NFSv4.1 COMPOUND arguments (header, every operation's arguments) on
//! arbitrary bytes: must never panic, and memory stays bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_nfs::fuzz::decode_compound4(data);
});
