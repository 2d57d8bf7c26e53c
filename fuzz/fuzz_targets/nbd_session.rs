//! A whole NBD client session (handshake options, then requests) from fuzz bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_nbd::fuzz::fuzz_session(data);
});
