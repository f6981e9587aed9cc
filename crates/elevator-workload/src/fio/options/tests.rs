use super::*;

#[test]
fn every_name_is_applied_and_aliases_resolve() {
    for names in NAMES {
        let opt = RawOpt {
            key: names[0].into(),
            value: None,
            file: "x".into(),
            line: 1,
        };
        // No option panics for want of a case (values may be refused).
        let _ = apply(names[0], &opt, &mut Opts::default());
    }
    assert_eq!(canonical("timeout"), Some("runtime"));
    assert_eq!(canonical("ratemin"), Some("rate_min"));
    assert_eq!(canonical("ss_dur"), Some("steadystate_duration"));
    assert_eq!(closest("iodepht"), Some("iodepth"));
    assert!(refused("sprandom").is_some());
}

#[test]
fn patterns_and_distributions() {
    assert_eq!(pattern("0xaa555aa5").unwrap(), vec![0xaa, 0x55, 0x5a, 0xa5]);
    assert_eq!(pattern("\"ab\"|0x01").unwrap(), b"ab\x01".to_vec());
    let Distribution::Zoned(z) = distribution("zoned:50/5:30/15:20/", 1024).unwrap() else {
        panic!()
    };
    assert_eq!(z[0], vec![(50, 5), (30, 15), (20, 80)]);
    assert_eq!(
        distribution("zipf:0.5", 1024).unwrap(),
        Distribution::Zipf(0.5)
    );
    assert!(
        distribution("zoned:50/5:30/15", 1024).is_err(),
        "access sums to 80"
    );
    assert_eq!(
        distribution("sequence:2,0,1", 1024).unwrap(),
        Distribution::Sequence(vec![2, 0, 1])
    );
}
