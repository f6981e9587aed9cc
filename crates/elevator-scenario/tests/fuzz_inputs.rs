//! Fuzzing the other parsers a user feeds: device profiles, io.max strings,
//! I/O priorities, sizes and durations. None may panic; errors from a
//! profile always name the file.

use elevator_core::{IoMax, IoPrio};
use elevator_scenario::{parse_duration, parse_size};
use proptest::prelude::*;

const PROFILE: &str = include_str!("../../elevator-device/profiles/ide-2003.toml");

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn mutated_device_profiles_never_panic(pos in 0usize..4000, insert in "[a-z0-9_=\\[\\]\"\\.\n -]{0,16}", cut in 0usize..40) {
        let mut text = PROFILE.to_string();
        let pos = pos.min(text.len());
        let end = (pos + cut).min(text.len());
        if text.is_char_boundary(pos) && text.is_char_boundary(end) {
            text.replace_range(pos..end, &insert);
        }
        if let Err(e) = elevator_device::parse("fuzz.toml", &text) {
            prop_assert!(e.to_string().contains("fuzz.toml"), "{e}");
        }
    }

    #[test]
    fn arbitrary_profiles_never_panic(text in ".{0,300}") {
        let _ = elevator_device::parse("fuzz.toml", &text);
    }

    #[test]
    fn small_strings_never_panic(s in ".{0,40}") {
        let _ = s.parse::<IoMax>();
        let _ = s.parse::<IoPrio>();
        let _ = parse_size(&s);
        let _ = parse_duration(&s);
    }

    #[test]
    fn io_max_round_trips(r in proptest::option::of(1u64..1 << 40), w in proptest::option::of(1u64..1 << 40), ri in proptest::option::of(1u64..1 << 20)) {
        let m = IoMax { rbps: r, wbps: w, riops: ri, wiops: None };
        prop_assert_eq!(m.to_string().parse::<IoMax>().unwrap(), m);
    }
}
