//! A REST API request body, decoded as every typed request (crates/daemon/src/api).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_daemon::api::fuzz::fuzz_request_body(data);
});
