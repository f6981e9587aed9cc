//! Fuzz target: `elevator_scenario::fuzzing::fio_job` on arbitrary bytes.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    elevator_scenario::fuzzing::fio_job(data);
});
