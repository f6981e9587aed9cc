//! Fuzz target: `elevator_scenario::fuzzing::device_profile` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    elevator_scenario::fuzzing::device_profile(data);
});
