//! Command packets after login: every command decoder (dump requests by position and by GTID
//! set, REGISTER_SLAVE, prepared-statement execution with its parameters) on any payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tibinlog_protocol::wire::command::{decode_command, decode_sid_block, Command};
use tibinlog_protocol::wire::stmt::decode_params;

fuzz_target!(|data: &[u8]| {
    if let Ok(Command::StmtExecute(ex)) = decode_command(data) {
        // Any declared parameter count against the body.
        let n = usize::from(data.last().copied().unwrap_or(0) % 32);
        let mut types = Vec::new();
        let long_data = vec![None; n];
        let _ = decode_params(&ex.params, n, &mut types, &long_data);
    }
    let _ = decode_command(data);
    let _ = decode_sid_block(data);
});
