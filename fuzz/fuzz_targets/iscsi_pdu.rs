//! The iSCSI PDU decoder (and the text-key parser behind it) on arbitrary bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_iscsi::pdu::fuzz_decode(data);
});
