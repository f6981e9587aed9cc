//! The HTML report without a browser (`scripts/check-report.sh` opens it in
//! headless Chromium): every chart present with drawn marks inside its
//! plot, no `NaN` or `inf`, axes with units, a legend entry per policy, the
//! timelines conserving every byte, recording charts changing no result,
//! a cut run marked as a lower bound, and `reproduce` linking each
//! scenario's page.

use elevator_core::Duration;
use elevator_metrics::Report;
use elevator_scenario::html::{reproduction_html, run_html, scenario_page};
use elevator_scenario::reproduce::{reproduce, ReproduceOptions};
use elevator_scenario::{builtin, run, RunOptions, Scenario};

/// Experiment 2 of 2003: a streaming writer, pdflush and an xterm start-up
/// under six policies, 13-29 s of simulated time; quick and varied.
const SCENARIO: &str = "morton-2-streaming-write-vs-interactivity";

fn scenario() -> Scenario {
    builtin(SCENARIO).expect("built-in").expect("valid")
}

fn charted(s: &Scenario) -> Report {
    let options = RunOptions {
        charts: true,
        ..RunOptions::default()
    };
    run(s, &options, &mut |_| {}).expect("runs")
}

/// Every `<svg class="chart">…</svg>` of a page.
fn charts(html: &str) -> Vec<&str> {
    html.split("<svg class=\"chart\"")
        .skip(1)
        .map(|c| &c[..c.find("</svg>").expect("closed svg")])
        .collect()
}

/// The numbers of every `points="x,y x,y"` attribute of a chart.
fn polyline_points(chart: &str) -> Vec<Vec<(f64, f64)>> {
    chart
        .split("points=\"")
        .skip(1)
        .map(|p| {
            p[..p.find('"').expect("closed attribute")]
                .split(' ')
                .map(|xy| {
                    let (x, y) = xy.split_once(',').expect("x,y");
                    (x.parse().expect("x"), y.parse().expect("y"))
                })
                .collect()
        })
        .collect()
}

fn view_box(chart: &str) -> (f64, f64) {
    let v = chart.split("viewBox=\"0 0 ").nth(1).expect("viewBox");
    let mut wh = v[..v.find('"').unwrap()].split(' ');
    let w = wh.next().unwrap().parse().unwrap();
    let h = wh.next().unwrap().parse().unwrap();
    (w, h)
}

fn assert_no_nan(html: &str) {
    for bad in ["NaN", "inf\"", "inf ", "inf,", ">inf"] {
        assert!(!html.contains(bad), "{bad:?} in the page");
    }
}

#[test]
fn every_chart_of_a_run_page_has_marks_axes_and_a_legend() {
    let report = charted(&scenario());
    let html = run_html(&report);
    assert_no_nan(&html);
    let kinds = report.runs[0].charts.len();
    assert!(kinds >= 3, "pdflush, writer, xterm: {kinds}");
    let charts = charts(&html);
    // A latency CDF and a timeline per job kind: each did I/O.
    assert_eq!(charts.len(), 2 * kinds, "charts on the page");
    for chart in &charts {
        let lines = polyline_points(chart);
        assert!(!lines.is_empty(), "a chart without marks:\n{chart}");
        let (w, h) = view_box(chart);
        for line in &lines {
            assert!(line.len() >= 2, "a line of {} points", line.len());
            for &(x, y) in line {
                assert!(
                    (0.0..=w).contains(&x) && (0.0..=h).contains(&y),
                    "({x}, {y}) outside {w}x{h}"
                );
            }
        }
        // One legend entry per drawn line, each naming a policy.
        let legend = chart.matches("stroke-width=\"2.5\"").count();
        assert_eq!(legend, lines.len(), "legend entries");
        for run in &report.runs {
            assert!(chart.contains(&run.label()), "{} missing", run.label());
        }
        let units = [
            "latency (ms, log scale)",
            "throughput (MB/s)",
            "simulated time (s)",
        ];
        assert!(
            units.iter().any(|u| chart.contains(u)),
            "no axis with its unit:\n{chart}"
        );
    }
    let cdfs = charts.iter().filter(|c| c.contains("latency (ms")).count();
    assert_eq!(cdfs, kinds);
    // The settings in force and the text tables are on the page.
    assert!(html.contains("fifo_batch=16"), "deadline's tunables");
    assert!(html.contains("nr_requests="), "block layer settings");
    assert!(html.contains("<pre>"), "the text report");
}

#[test]
fn timelines_hold_every_byte_and_recording_them_changes_no_result() {
    let s = scenario();
    let plain = run(&s, &RunOptions::default(), &mut |_| {}).expect("runs");
    let charted = charted(&s);
    for (p, c) in plain.runs.iter().zip(&charted.runs) {
        assert!(p.charts.is_empty(), "charts kept without being asked");
        assert_eq!(
            p.result, c.result,
            "{}: charts changed the result",
            p.scheduler
        );
        assert_eq!(p.jobs, c.jobs, "{}: charts changed the jobs", p.scheduler);
        // Each chart sums the jobs of its kind (`name` or `name.N`).
        for chart in &c.charts {
            let (mut read, mut write) = (0, 0);
            for j in &c.jobs {
                let base = j.name.rsplit_once('.').map_or(j.name.as_str(), |b| b.0);
                if j.name == chart.name || base == chart.name {
                    read += j.read_bytes;
                    write += j.write_bytes;
                }
            }
            assert_eq!(
                chart.throughput.total(),
                (read, write),
                "{} {}",
                c.scheduler,
                chart.name
            );
            if read + write > 0 {
                assert_eq!(chart.cdf.last().map(|p| p.1), Some(1.0), "CDF ends at 1");
            }
        }
    }
}

#[test]
fn a_cut_run_is_marked_as_a_lower_bound() {
    let mut s = scenario();
    // Shorter than any policy's start-up of the xterm (3-19 s).
    s.time_limit = Duration::from_secs(2);
    let report = charted(&s);
    assert!(report.runs.iter().all(|r| r.result.cut), "every run cut");
    let html = run_html(&report);
    assert_no_nan(&html);
    assert!(html.contains("<td class=\"cut\">&gt; "), "no lower bound");
    assert!(
        html.contains("(cut)"),
        "charts' legends do not mark the cut"
    );
    assert!(!charts(&html).is_empty());
}

#[test]
fn reproduce_links_each_scenario_page() {
    let options = ReproduceOptions {
        only: Some(SCENARIO.into()),
        charts: true,
        ..ReproduceOptions::default()
    };
    let r = reproduce(&options, &|_, _, _| {}).expect("reproduces");
    assert_eq!(r.reports.len(), 1);
    let page = reproduction_html(&r);
    assert_no_nan(&page);
    let link = format!("<a href=\"{}\">", scenario_page(SCENARIO));
    assert!(page.contains(&link), "no link {link}");
    let scenario = run_html(&r.reports[0]);
    assert!(
        charts(&scenario).len() >= 6,
        "the linked page has the charts"
    );
    // Without charts asked for, no link to a page that is not written.
    let plain = reproduce(
        &ReproduceOptions {
            charts: false,
            ..options
        },
        &|_, _, _| {},
    )
    .expect("reproduces");
    assert!(!reproduction_html(&plain).contains("href="));
}
