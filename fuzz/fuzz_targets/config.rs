//! libFuzzer target: `anteroom::fuzzing::config` (see src/fuzzing.rs for what it checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| anteroom::fuzzing::config(data));
