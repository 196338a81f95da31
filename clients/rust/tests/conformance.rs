//! The conformance scenarios shared by every client
//! (`conformance/scenarios.json`), run through this crate's typed calls
//! and header fields against a real server with the manual clock.
//!
//! A scenario's `client` picks the second tier its decisions go through:
//! `deny_cache` or `fallback` the tower layer (the crate's only deny
//! cache, fail-open and fail-closed limits and degraded mode), with the
//! client's timeout at `deadline_ms`; `lease_block: k` a [`LeasedLimit`]
//! per key leased in fixed blocks of `k`; without it, [`Client::send`].
//! Through the layer a decision was the fallback's when an admission has
//! no `RateLimit` field, a denial is `503`, or a `429` has no store
//! decision (degraded mode).

#[path = "../../../tests/common/mod.rs"]
mod common;
mod support;

use axum::http::HeaderName;
use common::*;
use redis_ratelimit_client::http::{
    header_fields, problem, HeaderKey, HttpLimit, Named, Reason, RedisRateLimitLayer,
};
use redis_ratelimit_client::{
    All, AllDecision, Client, Command, Decide, Error, LeasePlan, LeasedLimit, Peek, Policy,
    Throttle,
};
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
            (
                l["key"].as_str().expect("key").to_owned(),
                policy(&l["policy"]),
                l["name"].as_str().expect("name").to_owned(),
            )
        })
        .collect()
}

/// A throttle step's `CL.THROTTLE` (`quantity` default 1).
fn throttle(what: &Value) -> Throttle {
    let n = |field: &str| {
        what[field]
            .as_u64()
            .unwrap_or_else(|| panic!("throttle: {field}"))
    };
    let key = what["key"].as_str().expect("throttle: key");
    let period = Duration::from_secs(n("period_s"));
    Throttle::new(key, n("max_burst"), n("count"), period)
        .quantity(what["quantity"].as_u64().unwrap_or(1))
}

fn policy(words: &Value) -> Policy {
    let text = words.as_str().expect("policy");
    text.parse()
        .unwrap_or_else(|e| panic!("policy '{text}': {e}"))
}

/// What one decision answered, in the scenarios' words.
struct Answer {
    allowed: bool,
    /// One limit decided by its own command: what it has left.
    remaining: Option<u64>,
    retry_after: Option<Duration>,
    /// The header fields, names in lower case.
    headers: BTreeMap<String, String>,
    /// The problem body's `violated-policies`.
    violated: Value,
    /// Answered by the fallback, not decided by the store.
    fallback: bool,
}

impl Answer {
    /// A decision of the typed API, with the header fields and problem
    /// body the client contract gives it.
    fn of(decision: AllDecision, remaining: Option<u64>, names: &[Named]) -> Answer {
        let headers = header_fields(&decision, names)
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        let body: Value = serde_json::from_str(&problem(&decision, names)).expect("problem JSON");
        Answer {
            allowed: decision.allowed,
            remaining,
            retry_after: decision.retry_after,
            headers,
            violated: body["violated-policies"].clone(),
            fallback: false,
        }
    }
}

/// The header field in which the runner's error handler tells a denial's
/// exact wait (the contract's `Retry-After` is in whole seconds).
const WAIT_FIELD: &str = "x-conformance-retry-after-ms";

/// The header field in which the runner's error handler marks a denial
/// without a store decision (degraded mode's).
const LOCAL_FIELD: &str = "x-conformance-local";

/// What the layer is built with: its deny cache, and its limit's fallback
/// (`open`, `closed`, `degraded`).
#[derive(Clone)]
struct Tier {
    deny_cache: bool,
    fallback: Option<String>,
}

/// What a scenario's decisions go through (its `client`).
enum Limiter {
    Plain(Client),
    /// The layer, keyed by the `x-key` field; built at the first decide
    /// step, from its limit.
    Layered(Client, Tier, Option<(axum::Router, Policy, String)>),
    /// One leased limit per key, leased in blocks of `k`.
    Leased(Client, u64, BTreeMap<String, LeasedLimit>),
}

impl Limiter {
    fn new(client: Client, scenario: &Value) -> Limiter {
        let tier = &scenario["client"];
        let client = match tier["deadline_ms"].as_u64() {
            Some(ms) => client.timeout(Duration::from_millis(ms)),
            None => client,
        };
        let layered = Tier {
            deny_cache: tier["deny_cache"].as_bool() == Some(true),
            fallback: tier["fallback"].as_str().map(str::to_owned),
        };
        if layered.deny_cache || layered.fallback.is_some() {
            return Limiter::Layered(client, layered, None);
        }
        match tier["lease_block"].as_u64() {
            Some(k) => Limiter::Leased(client, k, BTreeMap::new()),
            None => Limiter::Plain(client),
        }
    }

    async fn decide(&mut self, step: &Value) -> Result<Answer, Error> {
        if step.get("throttle").is_some() {
            return self.throttle(step).await;
        }
        let cost = step["cost"].as_u64().unwrap_or(1);
        let limits = limits(step);
        let names: Vec<Named> = limits
            .iter()
            .map(|(_, p, n)| Named::new(n.clone(), p.quota().expect("a rate")))
            .collect();
        match self {
            Limiter::Plain(client) => {
                let client = match step["deadline_ms"].as_u64() {
                    Some(ms) => client.clone().timeout(Duration::from_millis(ms)),
                    None => client.clone(),
                };
                plain(&client, &limits, cost, &names).await
            }
            Limiter::Leased(client, k, leases) => {
                let [(key, policy, _)] = limits.as_slice() else {
                    panic!("a leased limit decides one limit a step");
                };
                let lease = leases.entry(key.clone()).or_insert_with(|| {
                    LeasedLimit::new(client.clone(), key.clone(), *policy, LeasePlan::fixed(*k))
                });
                let a = lease.acquire_cost(cost).await?;
                Ok(Answer {
                    allowed: a.allowed,
                    remaining: None,
                    retry_after: a.retry_after,
                    headers: BTreeMap::new(),
                    violated: Value::Array(Vec::new()),
                    fallback: false,
                })
            }
            Limiter::Layered(client, tier, layer) => {
                let [(key, policy, name)] = limits.as_slice() else {
                    panic!("the layer decides one limit a step");
                };
                let (router, built, built_name) = layer.get_or_insert_with(|| {
                    (layered(client, tier, *policy, name), *policy, name.clone())
                });
                assert!(
                    *built == *policy && built_name == name,
                    "the layer decides one limit a scenario"
                );
                through(router, key, cost).await
            }
        }
    }

    /// One `CL.THROTTLE` through the typed call.
    async fn throttle(&self, step: &Value) -> Result<Answer, Error> {
        let Limiter::Plain(client) = self else {
            panic!("a throttle step runs without a second tier");
        };
        let client = match step["deadline_ms"].as_u64() {
            Some(ms) => client.clone().timeout(Duration::from_millis(ms)),
            None => client.clone(),
        };
        let d = client.send(&throttle(&step["throttle"])).await?;
        Ok(Answer {
            allowed: !d.limited,
            remaining: Some(d.remaining),
            retry_after: d.retry_after,
            headers: BTreeMap::new(),
            violated: Value::Array(Vec::new()),
            fallback: false,
        })
    }

    /// Gives back every unused leased unit.
    async fn release(&self) -> Result<(), String> {
        let Limiter::Leased(_, _, leases) = self else {
            return Err("release: nothing is leased without `lease_block`".into());
        };
        for lease in leases.values() {
            lease
                .refund_all()
                .await
                .map_err(|e| format!("release: {e}"))?;
        }
        Ok(())
    }
}

/// An app behind the layer with `policy` per `x-key` (the store key is the
/// field's value) and `tier`'s deny cache and fallback, each request
/// costing the `x-cost` field's units, whose error handler tells a
/// denial's exact wait in [`WAIT_FIELD`] and marks one without a store
/// decision in [`LOCAL_FIELD`].
fn layered(client: &Client, tier: &Tier, policy: Policy, name: &str) -> axum::Router {
    let mut limit = HttpLimit::per_key(policy).prefix("").name(name);
    if tier.fallback.as_deref() == Some("open") {
        limit = limit.fail_open();
    }
    let mut builder = RedisRateLimitLayer::builder(
        client.clone(),
        HeaderKey::new(HeaderName::from_static("x-key")),
    )
    .limit(limit)
    .cost(|request: &axum::http::request::Parts| {
        request
            .headers
            .get("x-cost")
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .unwrap_or(1)
    });
    if tier.deny_cache {
        builder = builder.deny_cache(100);
    }
    if tier.fallback.as_deref() == Some("degraded") {
        builder = builder.degraded(1000);
    }
    let layer = builder
        .error_handler(|rejection| {
            let mut response = rejection.response;
            if let Reason::Denied(d) = rejection.reason {
                if let Some(wait) = d.retry_after {
                    let ms = wait.as_millis().to_string();
                    let value = ms.parse().expect("digits");
                    response.headers_mut().insert(WAIT_FIELD, value);
                }
                if d.decision.is_none() {
                    let value = "1".parse().expect("a value");
                    response.headers_mut().insert(LOCAL_FIELD, value);
                }
            }
            response
        })
        .build()
        .expect("layer");
    router(layer)
}

/// A request on `key` of `cost` through `router`: served is allowed,
/// `429` denied, `503` the fail-closed fallback's denial.
async fn through(router: &axum::Router, key: &str, cost: u64) -> Result<Answer, Error> {
    let cost = cost.to_string();
    let reply = get_with(router, &[("x-key", key), ("x-cost", &cost)]).await;
    assert!(
        matches!(reply.status, 200 | 429 | 503),
        "status {}: {}",
        reply.status,
        reply.body
    );
    let mut headers: BTreeMap<String, String> = reply
        .headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    let retry_after = headers
        .remove(WAIT_FIELD)
        .map(|ms| Duration::from_millis(ms.parse().expect("ms")));
    let fallback = match reply.status {
        200 => !headers.contains_key("ratelimit"),
        429 => headers.remove(LOCAL_FIELD).is_some(),
        _ => true,
    };
    let violated = match reply.status {
        429 => {
            let body: Value = serde_json::from_str(&reply.body).expect("problem JSON");
            body["violated-policies"].clone()
        }
        _ => Value::Array(Vec::new()),
    };
    Ok(Answer {
        allowed: reply.status == 200,
        remaining: None,
        retry_after,
        headers,
        violated,
        fallback,
    })
}

/// One decision through the typed calls: one limit by its own command,
/// several by one `RL.ALL`.
async fn plain(
    client: &Client,
    limits: &[(String, Policy, String)],
    cost: u64,
    names: &[Named],
) -> Result<Answer, Error> {
    if let [(key, policy, _)] = limits {
        let d = client
            .send(&Decide::new(key.clone(), *policy).cost(cost))
            .await?;
        let remaining = Some(d.remaining);
        return Ok(Answer::of(AllDecision::new(vec![d]), remaining, names));
    }
    let mut all = All::new();
    for (key, policy, _) in limits {
        all = all.limit(key.clone(), *policy);
    }
    let decision = client.send(&all.costs(vec![cost; limits.len()])).await?;
    Ok(Answer::of(decision, None, names))
}

/// Runs one decide step: repeated `times`, or until the server decides
/// (`until_served_ms`); where it differs, one line each.
async fn run_step(limiter: &mut Limiter, step: &Value) -> Vec<String> {
    let expect = &step["expect"];
    let mut out = Vec::new();
    for _ in 0..step["times"].as_u64().unwrap_or(1) {
        let start = Instant::now();
        let mut answer = limiter.decide(step).await;
        if let Some(ms) = step["until_served_ms"].as_u64() {
            let until = start + Duration::from_millis(ms);
            let unserved = |a: &Result<Answer, Error>| match a {
                Err(e) => e.is_unavailable(),
                Ok(a) => a.fallback,
            };
            while unserved(&answer) && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(5)).await; // polling a state, bounded
                answer = limiter.decide(step).await;
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
    if let Some(allowed) = expect["allowed"].as_bool() {
        if answer.allowed != allowed {
            out.push(format!("allowed {} (expected {allowed})", answer.allowed));
        }
    }
    if let (Some(want), Some(got)) = (expect["remaining"].as_u64(), answer.remaining) {
        if got != want {
            out.push(format!("remaining {got} (expected {want})"));
        }
    }
    if let Some(want) = expect.get("retry_after_ms") {
        let got = answer.retry_after.map(|w| w.as_millis() as u64);
        if got != want.as_u64() {
            out.push(format!("retry_after_ms {got:?} (expected {want})"));
        }
    }
    if let Some(want) = expect["fallback"].as_bool() {
        if answer.fallback != want {
            out.push(format!("fallback {} (expected {want})", answer.fallback));
        }
    }
    if let Some([lo, hi]) = expect["retry_after_ms_between"]
        .as_array()
        .map(Vec::as_slice)
    {
        let got = answer.retry_after.map(|w| w.as_millis() as u64);
        if !got.is_some_and(|ms| Some(ms) >= lo.as_u64() && Some(ms) <= hi.as_u64()) {
            out.push(format!(
                "retry_after_ms {got:?} (expected from {lo} to {hi})"
            ));
        }
    }
    if let Some(want) = expect["headers"].as_object() {
        for (name, value) in want {
            let got = answer.headers.get(&name.to_ascii_lowercase());
            if got.map(String::as_str) != value.as_str() {
                out.push(format!("header {name}: {got:?} (expected {value})"));
            }
        }
    }
    if let Some(want) = expect["violated"].as_array() {
        if answer.violated != Value::Array(want.clone()) {
            out.push(format!("violated {} (expected {want:?})", answer.violated));
        }
    }
    out
}

/// How a peek step reads what a key has left.
type Reading = Box<dyn Fn(&mut redis::Connection) -> Result<u64, Error>>;

/// A peek step: the key's `remaining` on the server (`RL.PEEK`, or a
/// `CL.THROTTLE` of quantity 0), read again until it matches for at most
/// the step's `within_ms`.
async fn peek(c: &mut redis::Connection, step: &Value) -> Vec<String> {
    let what = &step["peek"];
    let key = what["key"].as_str().expect("peek: key");
    // Built once, read on every poll.
    let read: Reading = match what.get("throttle") {
        Some(t) => {
            let mut t = t.clone();
            t["key"] = key.into();
            t["quantity"] = 0.into();
            let call = throttle(&t);
            Box::new(move |c| call.query(c).map(|d| d.remaining))
        }
        None => {
            let call = Peek::new(key, policy(&what["policy"]));
            Box::new(move |c| call.query(c).map(|d| d.remaining))
        }
    };
    let want = step["expect"]["remaining"]
        .as_u64()
        .expect("peek: remaining");
    let until = Instant::now() + Duration::from_millis(step["within_ms"].as_u64().unwrap_or(0));
    loop {
        let got = match read(c) {
            Ok(remaining) => remaining,
            Err(e) => return vec![format!("peek: {e}")],
        };
        if got == want {
            return Vec::new();
        }
        if Instant::now() >= until {
            return vec![format!("peek: remaining {got} (expected {want})")];
        }
        tokio::time::sleep(Duration::from_millis(5)).await; // polling a state, bounded
    }
}

/// A take step: another process's charge, sent on the runner's own
/// connection, which the limiter does not see.
fn take(c: &mut redis::Connection, step: &Value) -> Vec<String> {
    let what = &step["take"];
    let key = what["key"].as_str().expect("take: key");
    let words: Vec<&str> = what["policy"]
        .as_str()
        .expect("take: policy")
        .split_whitespace()
        .collect();
    let cost = what["cost"].as_u64().expect("take: cost").to_string();
    let command = format!("RL.{}", words[0].to_ascii_uppercase());
    let mut args = vec![command.as_str(), key];
    args.extend(&words[1..]);
    args.extend(["COST", cost.as_str()]);
    match decide(c, &args)[0] {
        1 => Vec::new(),
        _ => vec![format!("take {cost} on {key}: denied")],
    }
}

/// `RL.*` commands the server ran since `CONFIG RESETSTAT`, other than
/// `RL.CLOCK` and `RL.PEEK`.
fn server_commands(c: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(c)
        .expect("INFO");
    info.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_rl."))
        .filter(|l| !l.starts_with("clock:") && !l.starts_with("peek:"))
        .filter_map(|l| {
            l.split_once(":calls=")?
                .1
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
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
        for scenario in file["scenarios"].as_array().expect("scenarios") {
            let name = scenario["name"].as_str().expect("name");
            let _: () = redis::cmd("FLUSHALL").query(&mut c).expect("FLUSHALL");
            let _: () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query(&mut c)
                .expect("RESETSTAT");
            // A client of its own: a circuit opened by one scenario's
            // outage says nothing of the next one's.
            let mut limiter = Limiter::new(client(&server, Protocol::Resp2), scenario);
            for (i, step) in scenario["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .enumerate()
            {
                let mut differs = Vec::new();
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
                if step["release"].as_bool() == Some(true) {
                    differs.extend(limiter.release().await.err());
                }
                if step.get("take").is_some() {
                    differs.extend(take(&mut c, step));
                }
                if step.get("decide").is_some() || step.get("throttle").is_some() {
                    differs.extend(run_step(&mut limiter, step).await);
                }
                if step.get("peek").is_some() {
                    differs.extend(peek(&mut c, step).await);
                }
                if let Some(want) = step["expect"]["server_commands"].as_u64() {
                    let got = server_commands(&mut c);
                    if got != want {
                        differs.push(format!("server commands {got} (expected {want})"));
                    }
                }
                failed.extend(
                    differs
                        .into_iter()
                        .map(|d| format!("{name}, step {i}: {d}")),
                );
            }
            println!("conformance: {name}");
        }
    });
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}
