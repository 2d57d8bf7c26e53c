#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_fuzzing::l2arc_header(data);
});
