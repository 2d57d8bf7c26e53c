//! The SCSI CDB decoder and the command executor on arbitrary CDBs and Data-Out.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cachalot_iscsi::scsi::cdb::fuzz_parse(data);
});
