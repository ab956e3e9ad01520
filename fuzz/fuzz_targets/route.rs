//! libFuzzer target: `anteroom::fuzzing::route` (see src/fuzzing.rs for what it checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| anteroom::fuzzing::route(data));
