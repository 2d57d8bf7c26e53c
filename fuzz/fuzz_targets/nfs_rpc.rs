//! RPC record marking, call headers, credentials and every NFSv3 / MOUNT
//! argument decoder, on arbitrary bytes: must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_nfs::fuzz::decode_everything(data);
});
