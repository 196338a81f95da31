//! The `make demo` replays against a test server: the numbers the README
//! quotes, and a chart with a panel per trace and a row per algorithm.

mod common;
#[path = "../examples/demo.rs"]
#[allow(dead_code)]
mod demo;

use common::*;

#[test]
fn the_traces_admit_what_the_readme_says() {
    let s = Server::start();
    let mut c = s.conn();
    let mut results = Vec::new();
    for (ti, trace) in demo::traces().into_iter().enumerate() {
        let mut runs = Vec::new();
        for (ai, alg) in demo::ALGORITHMS.iter().enumerate() {
            let base = demo::T0 + (ti * 10 + ai) as u64 * 86_400 * demo::SECOND;
            let run = demo::replay(&mut c, &trace, alg, base, &format!("d:{ti}:{ai}"))
                .unwrap()
                .unwrap_or_else(|| panic!("{} is missing", alg.command));
            runs.push((alg, run));
        }
        results.push((trace, runs));
    }
    let admitted: Vec<Vec<(&str, usize)>> = results
        .iter()
        .map(|(_, runs)| {
            runs.iter()
                .map(|(a, r)| (a.label, r.admitted_us.len()))
                .collect()
        })
        .collect();
    let expect = |counts: [usize; 7]| -> Vec<(&str, usize)> {
        demo::ALGORITHMS
            .iter()
            .map(|a| a.label)
            .zip(counts)
            .collect()
    };
    // FIXED ALIGNED, FIXED, EXACT, BUCKETS 5, APPROX, GCRA, BUCKET.
    assert_eq!(admitted[0], expect([20, 10, 10, 10, 10, 11, 11]));
    assert_eq!(admitted[1], expect([40, 40, 40, 40, 38, 49, 49]));
    assert_eq!(admitted[2], expect([60, 60, 60, 50, 55, 67, 67]));

    // The boundary burst: FIXED ALIGNED's 20 all fall within 2 seconds.
    let (trace, runs) = &results[0];
    let aligned = &runs[0].1.admitted_us;
    assert_eq!(aligned, &trace.times_us);
    assert!(aligned[19] - aligned[0] < 2 * demo::SECOND);

    // The chart: in each trace's panel the offered load per second, then a
    // row per algorithm with offered and admitted requests as ticks (plus
    // one of each in the legend) and its count at the end, and the quiet
    // 30 s of the second trace cut out.
    let svg = demo::chart(&results);
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
    assert_eq!(svg.matches(r#"class="offered""#).count(), 3 * 7 + 1);
    assert_eq!(svg.matches(r#"class="admitted""#).count(), 3 * 7 + 1);
    assert_eq!(svg.matches(r#"class="label""#).count(), 3 * (7 + 1));
    assert_eq!(svg.matches(r#"class="rate""#).count(), 3);
    assert_eq!(svg.matches(r#"class="cut""#).count(), 1);
    for (trace, runs) in &results {
        let offered = trace.times_us.len();
        for (alg, run) in runs {
            let n = run.admitted_us.len();
            assert!(svg.contains(&format!(">{}<", alg.label)), "{}", alg.label);
            assert!(
                svg.contains(&format!(">{n} of {offered}<")),
                "{n} of {offered}"
            );
        }
    }
}
