//! The conformance scenarios shared by every client
//! (`conformance/scenarios.json`), run through this crate's typed calls
//! and header fields against a real server with the manual clock.

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use common::*;
use redis_ratelimit_client::http::{header_fields, problem, Named};
use redis_ratelimit_client::{All, AllDecision, Client, Decide, Error, Policy};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::*;

/// One limit of a decide step: its key, its policy's words, its name.
fn limits(step: &Value) -> Vec<(String, Policy, String)> {
    step["decide"]
        .as_array()
        .expect("decide: a list of limits")
        .iter()
        .map(|l| {
            let text = l["policy"].as_str().expect("policy");
            (
                l["key"].as_str().expect("key").to_owned(),
                text.parse()
                    .unwrap_or_else(|e| panic!("policy '{text}': {e}")),
                l["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect()
}

/// What one decide step answered, in the scenarios' words.
struct Answer {
    decision: AllDecision,
    remaining: Option<u64>,
    names: Vec<Named>,
}

async fn decide(client: &Client, step: &Value) -> Result<Answer, Error> {
    let limits = limits(step);
    let cost = step["cost"].as_u64().unwrap_or(1);
    let names = limits
        .iter()
        .map(|(_, p, n)| Named::new(n.clone(), p.quota().expect("a rate")))
        .collect();
    if let [(key, policy, _)] = limits.as_slice() {
        let d = client
            .send(&Decide::new(key.clone(), *policy).cost(cost))
            .await?;
        let remaining = Some(d.remaining);
        return Ok(Answer {
            decision: AllDecision::new(vec![d]),
            remaining,
            names,
        });
    }
    let mut all = All::new();
    for (key, policy, _) in &limits {
        all = all.limit(key.clone(), *policy);
    }
    let all = all.costs(vec![cost; limits.len()]);
    let decision = client.send(&all).await?;
    Ok(Answer {
        decision,
        remaining: None,
        names,
    })
}

/// Runs one decide step: at its deadline, repeated `times`, or until the
/// server decides (`until_served_ms`); where it differs, one line each.
async fn run_step(client: &Client, step: &Value) -> Vec<String> {
    let expect = &step["expect"];
    let client = match step["deadline_ms"].as_u64() {
        Some(ms) => client.clone().timeout(Duration::from_millis(ms)),
        None => client.clone(),
    };
    let mut out = Vec::new();
    for _ in 0..step["times"].as_u64().unwrap_or(1) {
        let start = Instant::now();
        let mut answer = decide(&client, step).await;
        if let Some(ms) = step["until_served_ms"].as_u64() {
            let until = start + Duration::from_millis(ms);
            while matches!(&answer, Err(e) if e.is_unavailable()) && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await; // polling a state, bounded
                answer = decide(&client, step).await;
            }
        }
        let took = start.elapsed();
        if let Some(ms) = expect["within_ms"].as_u64() {
            if took > Duration::from_millis(ms) {
                out.push(format!("answered after {took:?} (expected within {ms} ms)"));
            }
        }
        match answer {
            Err(e) if expect["unavailable"].as_bool() == Some(true) && e.is_unavailable() => {}
            Err(e) => out.push(format!("error {e}")),
            Ok(_) if expect["unavailable"].as_bool() == Some(true) => {
                out.push("decided (expected: the store unavailable)".into())
            }
            Ok(a) => out.extend(differences(&a, expect)),
        }
    }
    out
}

/// Where `answer` differs from `expect`, one line each.
fn differences(answer: &Answer, expect: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let d = &answer.decision;
    if let Some(allowed) = expect["allowed"].as_bool() {
        if d.allowed != allowed {
            out.push(format!("allowed {} (expected {allowed})", d.allowed));
        }
    }
    if let (Some(want), Some(got)) = (expect["remaining"].as_u64(), answer.remaining) {
        if got != want {
            out.push(format!("remaining {got} (expected {want})"));
        }
    }
    if let Some(want) = expect.get("retry_after_ms") {
        let got = d.retry_after.map(|w| w.as_millis() as u64);
        if got != want.as_u64() {
            out.push(format!("retry_after_ms {got:?} (expected {want})"));
        }
    }
    if let Some(want) = expect["headers"].as_object() {
        let fields: BTreeMap<String, String> = header_fields(d, &answer.names)
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        for (name, value) in want {
            let got = fields.get(&name.to_ascii_lowercase());
            if got.map(String::as_str) != value.as_str() {
                out.push(format!("header {name}: {got:?} (expected {value})"));
            }
        }
    }
    if let Some(want) = expect["violated"].as_array() {
        let body: Value = serde_json::from_str(&problem(d, &answer.names)).expect("problem JSON");
        if body["violated-policies"] != Value::Array(want.clone()) {
            out.push(format!(
                "violated {} (expected {want:?})",
                body["violated-policies"]
            ));
        }
    }
    out
}

#[test]
fn every_scenario_answers_as_written() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../conformance/scenarios.json"
    ))
    .expect("conformance/scenarios.json");
    let file: Value = serde_json::from_str(&text).expect("scenarios JSON");
    let mut server = Server::start();
    let mut c = server.conn();
    let mut failed = Vec::new();
    block_on(async {
        let client = client(&server, Protocol::Resp2);
        for scenario in file["scenarios"].as_array().expect("scenarios") {
            let name = scenario["name"].as_str().expect("name");
            let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
            for (i, step) in scenario["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .enumerate()
            {
                if let Some(ms) = step["clock_ms"].as_u64() {
                    clock_set(&mut c, ms * 1_000);
                }
                if let Some(us) = step["clock_us"].as_u64() {
                    clock_set(&mut c, us);
                }
                if step["freeze"].as_bool() == Some(true) {
                    server.freeze();
                }
                if step["resume"].as_bool() == Some(true) {
                    server.resume();
                }
                if step.get("decide").is_some() {
                    for d in run_step(&client, step).await {
                        failed.push(format!("{name}, step {i}: {d}"));
                    }
                }
            }
            println!("conformance: {name}");
        }
    });
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
