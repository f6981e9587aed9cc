use super::*;
use elevator_core::{Duration, Op};
use proptest::prelude::*;

const BLKPARSE: &str = "\
  8,0    3        1     0.000000000   697  Q  WS 223490 + 8 [kjournald]
  8,0    3        2     0.000002125   697  G  WS 223490 + 8 [kjournald]
  8,0    3        3     0.000003000   697  P   N [kjournald]
  8,0    3        4     0.000004000   697  I  WS 223490 + 8 [kjournald]
  8,0    3        5     0.000005000   697  D  WS 223490 + 8 [kjournald]
  8,0    1        1     0.001200000  4012  Q  RM 1000 + 16 [xterm]
  8,0    1        2     0.001300000  4012  Q   N [xterm]
  8,0    0        1     0.002000000     0  C  WS 223490 + 8 [0]
  8,0    1        3     0.003000000  4013  Q  DS 5000 + 8 [fstrim]
  8,0    1        4     0.004000000   697  Q   W 223498 + 128 [kjournald]
CPU0 (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           0,        0KiB
Total (8,0):
";

#[test]
fn blkparse_queues_become_records_per_process() {
    let (r, procs) = parse_all("t.blkparse", BLKPARSE, TraceFormat::Blkparse).unwrap();
    assert_eq!(procs, vec!["kjournald-697", "xterm-4012"]);
    assert_eq!(r.len(), 3);
    assert_eq!(
        (r[0].op, r[0].sync, r[0].sector, r[0].sectors),
        (Op::Write, true, 223490, 8)
    );
    assert_eq!((r[1].op, r[1].meta, r[1].process), (Op::Read, true, 1));
    assert_eq!(r[1].time, Duration(1_200_000));
    assert_eq!((r[2].sync, r[2].sectors, r[2].line), (false, 128, 10));
    assert_eq!(
        TraceFormat::detect(BLKPARSE.lines().next().unwrap()),
        Some(TraceFormat::Blkparse)
    );
}

#[test]
fn fio_iologs_v2_waits_and_v3_timestamps() {
    let v2 = "fio version 2 iolog\n/dev/sdb add\n/dev/sdb open\n/dev/sdb read 4096 8192\n\
              /dev/sdb wait 250\n/dev/sdb write 1000 100\n/dev/sdb close\n";
    let (r, procs) = parse_all("a.log", v2, TraceFormat::FioIolog).unwrap();
    assert_eq!(procs, vec!["/dev/sdb"]);
    assert_eq!(
        (r[0].sector, r[0].sectors, r[0].time),
        (8, 16, Duration::ZERO)
    );
    // 1000..1100 bytes lies in sectors 1 and 2.
    assert_eq!((r[1].op, r[1].sector, r[1].sectors), (Op::Write, 1, 2));
    assert_eq!(r[1].time, Duration::from_micros(250));
    let v3 = "fio version 3 iolog\n2 f add\n872 f open\n878 f write 0 16384\n\
              1888 g read 512 512\n";
    let (r, procs) = parse_all("b.log", v3, TraceFormat::FioIolog).unwrap();
    assert_eq!(procs, vec!["f", "g"]);
    assert_eq!(r[1].time, Duration::from_micros(1010));
    let e = parse_all(
        "b.log",
        "fio version 3 iolog\n5 f wait 10\n",
        TraceFormat::FioIolog,
    )
    .unwrap_err();
    assert_eq!((e.line, e.field), (2, "action"));
    let e = parse_all("c.log", "/dev/sdb read 0 4096\n", TraceFormat::FioIolog).unwrap_err();
    assert_eq!((e.line, e.field), (1, "header"));
}

#[test]
fn msr_csv_with_ticks_and_response_times() {
    let csv = "Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime\n\
               128166385295514663,hm,0,Write,9056014336,2048,2833\n\
               128166385295514878,hm,0,Read,11855351808,512,2617\n";
    let (r, procs) = parse_all("hm_0.csv", csv, TraceFormat::Msr).unwrap();
    assert_eq!(procs, vec!["hm-0"]);
    assert_eq!((r[0].sector, r[0].sectors), (9056014336 / 512, 4));
    assert_eq!(r[1].time, Duration(21_500));
    assert_eq!(r[1].service, Some(Duration(261_700)));
    let e = parse_all("hm_0.csv", &csv.replace("Read", "Trim"), TraceFormat::Msr).unwrap_err();
    assert_eq!((e.line, e.field), (3, "Type"));
    assert!(e.to_string().starts_with("hm_0.csv:3: field `Type`"), "{e}");
}

#[test]
fn mqsim_and_disksim_formats() {
    let mq = "11413000 0 657728 16 1\n11565000 1 31244784 64 0\n";
    let (r, procs) = parse_all("w.trace", mq, TraceFormat::Mqsim).unwrap();
    assert_eq!(procs, vec!["dev0", "dev1"]);
    assert_eq!(
        (r[1].time, r[1].op, r[1].sectors),
        (Duration(152_000), Op::Write, 64)
    );
    assert_eq!(
        TraceFormat::detect(mq.lines().next().unwrap()),
        Some(TraceFormat::Mqsim)
    );

    let ascii = "0.000 0 1000 8 1\n12.5 0 2000 16 0\n";
    let (r, _) = parse_all("d.trace", ascii, TraceFormat::DisksimAscii).unwrap();
    assert_eq!((r[1].time, r[1].op), (Duration(12_500_000), Op::Write));
    assert_eq!(
        TraceFormat::detect("12.5 0 2000 16 0"),
        Some(TraceFormat::DisksimAscii)
    );

    let valid = "R Hit 265552 2 14901.000000 4757.708232\nW Miss 311664 30 12628.0 17035.8\n";
    let (r, _) = parse_all("v.trace", valid, TraceFormat::DisksimValidate).unwrap();
    assert_eq!(r[0].service, Some(Duration(14_901_000)));
    // The second arrives after the first's service and its gap.
    assert_eq!(r[1].time, Duration(14_901_000 + 4_757_708));
    assert_eq!(
        TraceFormat::detect(valid.lines().next().unwrap()),
        Some(TraceFormat::DisksimValidate)
    );
    let e = parse_all("v.trace", "R Hit 1 2 3\n", TraceFormat::DisksimValidate).unwrap_err();
    assert_eq!((e.line, e.field), (1, "next"));
}

#[test]
fn errors_name_file_line_and_field() {
    let cases: [(TraceFormat, &str, usize, &str); 9] = [
        (TraceFormat::Mqsim, "1 0 8 8 1\n0 0 8 8 1\n", 2, "time"),
        (TraceFormat::Mqsim, "1 0 8 0 1\n", 1, "size"),
        (TraceFormat::Mqsim, "1 0 8 8 2\n", 1, "type"),
        (TraceFormat::Mqsim, "1 0 8 8 1 9\n", 1, "line"),
        (
            TraceFormat::Blkparse,
            "8,0 0 1 0.1 5 Q X 1 + 8 [a]\n",
            1,
            "rwbs",
        ),
        (
            TraceFormat::Blkparse,
            "8,0 0 1 0.1 5 Z R 1 + 8 [a]\n",
            1,
            "action",
        ),
        (
            TraceFormat::Blkparse,
            "8,0 0 1 0.1 5 Q R 1 + 8\n",
            1,
            "process",
        ),
        (
            TraceFormat::DisksimAscii,
            "1.0 0 1 8 1\n0.5 0 1 8 1\n",
            2,
            "time",
        ),
        (TraceFormat::Msr, "1,h,0,Read,0,512\n", 1, "ResponseTime"),
    ];
    for (format, text, line, field) in cases {
        let e = parse_all("f", text, format).unwrap_err();
        assert_eq!((e.line, e.field), (line, field), "{format}: {e}");
    }
    let long = format!("1 0 {} 8 1\n", "9".repeat(5000));
    assert_eq!(
        parse_all("f", &long, TraceFormat::Mqsim).unwrap_err().field,
        "line"
    );
    let binary: &[u8] = &[0xff, 0xfe, b'\n'];
    let mut reader = TraceReader::new("f", binary, TraceFormat::Mqsim);
    assert_eq!(reader.next().unwrap().unwrap_err().field, "line");
    assert!(reader.next().is_none(), "a reader stops at its first error");
}

#[test]
fn decimals_are_exact() {
    assert_eq!(read::parse_decimal_ns("4757.708232", 1000), Some(4_757_708));
    assert_eq!(
        read::parse_decimal_ns(".5", 1_000_000_000),
        Some(500_000_000)
    );
    assert_eq!(
        read::parse_decimal_ns("0.000002125", 1_000_000_000),
        Some(2125)
    );
    assert_eq!(read::parse_decimal_ns("-1", 1), None);
    assert_eq!(read::parse_decimal_ns(".", 1), None);
    assert_eq!(read::parse_decimal_ns("1e3", 1), None);
}

/// Every field of every format, in any order: the reader returns records
/// or one error naming a real line; it never panics.
fn check_never_panics(format: TraceFormat, text: &str) -> Result<(), TestCaseError> {
    let lines = text.split('\n').count();
    let mut reader = TraceReader::new("fuzz", text.as_bytes(), format);
    let mut last = Duration::ZERO;
    for item in reader.by_ref() {
        match item {
            Ok(r) => {
                prop_assert!(r.time >= last);
                prop_assert!(r.sectors >= 1 && u64::from(r.sectors) <= read::MAX_REQUEST_SECTORS);
                prop_assert!(r.line >= 1 && r.line <= lines);
                last = r.time;
            }
            Err(e) => {
                prop_assert!(e.line <= lines, "{e}");
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
    Ok(())
}

const TOKEN: &str = "(-?[0-9]{1,22}(\\.[0-9]{0,12})?|8,0|R|W|WS|RM|N|DS|Q|C|G|\\[[a-z]{1,4}\\]|\\+|Hit|Miss|Read|Write|read|write|wait|add|fio version [1-4] iolog|[a-zA-Z/.]{1,6}|CPU0)";

/// Fields of DiskSim validation and MQSim lines, valid and nearly so.
const FAST_TOKEN: &str = "([0-9]{1,3}|[0-9]{18,21}|0[0-9]{0,3}|\\+[0-9]|-1|[0-9]{0,6}\\.[0-9]{0,6}|\
                          [0-9]\\.[0-9]{17,20}|[0-9]{15,21}\\.[0-9]|4294967296|\\.|R|W|Hit|Miss|hit|\
                          #|#R|0|1|2|R\u{e9})";
/// Whole lines of either format, each field valid or nearly so.
const FAST_LINE: &str = "((R|W|X) (Hit|Miss|Hot) ([0-9]{1,8}|\\+5|[0-9]{20}) ([0-9]{1,2}|0|70000) \
                         ([0-9]{1,5}\\.[0-9]{0,5}|\\.|-1|[0-9]{19}) ([0-9]{1,5}\\.[0-9]{0,19}|[0-9]{1,3})\
                         |([0-9]{1,9}|\\+1|[0-9]{21}) ([0-3]|4294967296|-1) ([0-9]{1,10}|1\\.5) \
                         ([0-9]{1,2}|0|70000) (0|1|2| 1))";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn readers_never_panic_on_token_soup(
        format in prop::sample::select(TraceFormat::ALL.to_vec()),
        lines in prop::collection::vec(
            prop::collection::vec(prop::string::string_regex(TOKEN).unwrap(), 0..12), 0..8),
        sep in prop::sample::select(vec![" ", "\t", ","]),
    ) {
        let text: Vec<String> = lines.iter().map(|l| l.join(sep)).collect();
        check_never_panics(format, &text.join("\n"))?;
    }

    #[test]
    fn readers_never_panic_on_arbitrary_bytes(
        format in prop::sample::select(TraceFormat::ALL.to_vec()),
        bytes in prop::collection::vec(any::<u8>(), 0..600),
    ) {
        let mut reader = TraceReader::new("fuzz", bytes.as_slice(), format);
        for item in reader.by_ref() {
            if let Err(e) = item {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    /// The byte-level path of the volume formats (DiskSim validation,
    /// MQSim) reads every line exactly as the general path does: the same
    /// records, the same processes, the same first error.
    #[test]
    fn the_fast_path_reads_as_the_general_path(
        format in prop::sample::select(vec![TraceFormat::DisksimValidate, TraceFormat::Mqsim]),
        soup in prop::collection::vec(
            prop::collection::vec(prop::string::string_regex(FAST_TOKEN).unwrap(), 0..8), 0..6),
        shaped in prop::collection::vec(prop::string::string_regex(FAST_LINE).unwrap(), 0..12),
        sep in prop::sample::select(vec![" ", "  ", "\t", " \r", "\x0b", " \u{a0}"]),
    ) {
        // Lines of the right shape (most of them valid in one format or
        // the other) with a few of token soup among them.
        let mut text: Vec<String> = shaped.iter().map(|l| l.replace(' ', sep)).collect();
        let at = text.len() / 2;
        text.splice(at..at, soup.iter().map(|l| l.join(sep)));
        let text = text.join("\n");
        let read = |reader: TraceReader<&[u8]>| {
            let mut reader = reader;
            let items: Vec<_> = reader.by_ref().collect();
            (items, reader.processes().to_vec())
        };
        let fast = read(TraceReader::new("f", text.as_bytes(), format));
        let general = read(TraceReader::new("f", text.as_bytes(), format).without_fast_path());
        prop_assert_eq!(fast, general);
    }

    /// Decimals read as the plain definition reads them: the whole part
    /// times the unit, plus each of the first 18 fractional digits times
    /// its share of the unit, in nanoseconds rounded down.
    #[test]
    fn decimals_read_as_defined(
        text in "[0-9]{0,23}(\\.[0-9]{0,23})?|[0-9.+-e]{0,6}",
        unit in prop::sample::select(vec![1u128, 100, 1000, 1_000_000, 1_000_000_000]),
    ) {
        let reference = || -> Option<u128> {
            let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
            let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
            if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) || int.len() > 20 {
                return None;
            }
            let whole: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
            let mut scale = unit * 1_000_000_000_000_000_000;
            let mut part = 0u128;
            for b in frac.bytes().take(18) {
                scale /= 10;
                part += u128::from(b - b'0') * scale;
            }
            let value = whole.checked_mul(unit)?.checked_add(part / 1_000_000_000_000_000_000)?;
            (value <= 1 << 60).then_some(value)
        };
        prop_assert_eq!(read::parse_decimal_ns(&text, unit), reference());
    }

    /// Valid MQSim traces round-trip exactly: what is written is read.
    #[test]
    fn mqsim_round_trip(reqs in prop::collection::vec(
        (0u64..1_000_000, 0u32..4, 0u64..1 << 40, 1u64..4096, any::<bool>()), 1..50)) {
        let mut t = 0;
        let mut text = String::new();
        for &(gap, dev, sector, size, read) in &reqs {
            t += gap;
            text.push_str(&format!("{t} {dev} {sector} {size} {}\n", u8::from(read)));
        }
        let (records, _) = parse_all("rt", &text, TraceFormat::Mqsim).unwrap();
        let t0 = reqs[0].0;
        let mut t = 0;
        for (r, &(gap, _, sector, size, read)) in records.iter().zip(&reqs) {
            t += gap;
            prop_assert_eq!(r.time, Duration(t - t0));
            prop_assert_eq!((r.sector, u64::from(r.sectors)), (sector, size));
            prop_assert_eq!(r.op == Op::Read, read);
        }
    }
}

// ------------------------------------------------------------- replay --

mod replays {
    use super::*;
    use elevator_core::Instant;
    use elevator_core::Workload;
    use elevator_sched::stack::{Origin, StackBuilder};
    use elevator_sim::{Engine, EngineConfig};

    fn run(text: &str, format: TraceFormat, mode: ReplayMode) -> (TraceReplay<&[u8]>, Instant) {
        let dev = elevator_device::open("nvme").unwrap();
        let limits = dev.limits();
        let noop = StackBuilder::new("noop", Origin::command_line()).unwrap();
        let (mut engine, _) = Engine::build(noop, dev, EngineConfig::default());
        let reader = TraceReader::new("t", text.as_bytes(), format);
        let mut replay = TraceReplay::new(reader, mode, limits.capacity, limits.max_sectors, 1);
        let summary = engine.run(&mut replay);
        assert!(replay.finished());
        (replay, summary.end)
    }

    #[test]
    fn open_loop_issues_every_request_at_its_time() {
        let text = "1000000 0 0 8 1\n1000000 1 800 8 1\n3000000 0 64 2048 0\n9000000 1 1 8 1\n";
        let (replay, end) = run(
            text,
            TraceFormat::Mqsim,
            ReplayMode::Open { time_scale: 1.0 },
        );
        let s = replay.summary();
        assert_eq!((s.records, s.max_drift), (4, Duration::ZERO));
        // The 1 MiB write went out in pieces of the device's largest size.
        assert_eq!(s.split, 1);
        assert_eq!(replay.total().ios, 4);
        assert_eq!(replay.process_stats().len(), 2);
        assert!(end >= Instant(8_000_000), "the last arrival is 8 ms in");
        let (slow, end2) = run(
            text,
            TraceFormat::Mqsim,
            ReplayMode::Open { time_scale: 2.0 },
        );
        assert_eq!(slow.total().ios, 4);
        assert!(
            end2 >= Instant(16_000_000),
            "time scale 2 doubles the arrivals"
        );
    }

    #[test]
    fn closed_loop_waits_for_completion_plus_think() {
        // Measured service 100 µs, then 1 ms to the next arrival.
        let text = "R Miss 0 8 100.0 1000.0\nR Miss 8 8 100.0 1000.0\nR Miss 16 8 100.0 0\n";
        let (replay, end) = run(
            text,
            TraceFormat::DisksimValidate,
            ReplayMode::Closed { think_scale: 1.0 },
        );
        assert_eq!(replay.total().ios, 3);
        let simulated = end.since(Instant::ZERO);
        // Three services plus two thinks of exactly 1 ms.
        assert!(simulated > Duration::from_millis(2), "{simulated:?}");
        let service = simulated.saturating_sub(Duration::from_millis(2));
        assert!(service < Duration::from_millis(1), "{service:?}");
        let (fast, end0) = run(
            text,
            TraceFormat::DisksimValidate,
            ReplayMode::Closed { think_scale: 0.0 },
        );
        assert_eq!(fast.total().ios, 3);
        assert!(end0 < Instant(1_000_000));
    }

    #[test]
    fn closed_loop_processes_run_side_by_side() {
        // Two processes; each request's think is its gap to the process's
        // previous issue (no measured service): 5 ms each.
        let text = "0 0 0 8 1\n0 1 1000 8 1\n5000000 0 8 8 1\n5000000 1 1008 8 1\n";
        let (replay, end) = run(
            text,
            TraceFormat::Mqsim,
            ReplayMode::Closed { think_scale: 1.0 },
        );
        assert_eq!(replay.total().ios, 4);
        assert!(
            end > Instant(5_000_000) && end < Instant(6_000_000),
            "{end:?}"
        );
    }

    #[test]
    fn a_bad_line_mid_trace_stops_the_replay_with_its_error() {
        let text = "0 0 0 8 1\n1000 0 8 8 x\n2000 0 16 8 1\n";
        let (replay, _) = run(
            text,
            TraceFormat::Mqsim,
            ReplayMode::Open { time_scale: 1.0 },
        );
        let e = replay.error().expect("the error is kept");
        assert_eq!((e.line, e.field), (2, "type"));
        assert_eq!(replay.total().ios, 1);
    }
}
