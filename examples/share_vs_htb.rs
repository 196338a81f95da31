//! RL.SHARE beside Linux HTB: who gets a parent's spare rate.
//!
//! `cargo run --release --example share_vs_htb` prints a markdown table.
//! Each scenario sends the same offered load to RL.SHARE's core (the
//! decision over the path's stored values, with the time passed in, as the
//! command runs it, keys expiring as Redis would expire them) and to a
//! fluid model of HTB (each class first gets what it asks up to its rate;
//! a parent's spare rate goes to its children still asking, in proportion
//! to their rates, up to their ceilings; HTB's deficit round robin with a
//! quantum proportional to the rate, in the limit). Arrivals are Poisson,
//! cost 1, a denied request is dropped; the RNG is seeded, so the table is
//! reproducible. Figures are units admitted per period, averaged over the
//! run.

use rand::{Rng, SeedableRng};
use redis_ratelimit::api::{self, Micros, Policy};
use std::collections::HashMap;

/// 2026-01-01T00:00:00Z.
const START_US: u64 = 1_767_225_600_000_000;

/// A node: its key, its parent's (none: the root), its assured rate and
/// ceiling per period (the root: its rate, no ceiling).
struct Class {
    key: &'static str,
    parent: Option<&'static str>,
    rate: u64,
    ceil: Option<u64>,
}

struct Scenario {
    name: &'static str,
    period_us: u64,
    periods: u64,
    classes: Vec<Class>,
    /// Per leaf: its key and its offered load per period.
    loads: Vec<(&'static str, f64)>,
}

fn class(key: &'static str, parent: &'static str, rate: u64, ceil: u64) -> Class {
    Class {
        key,
        parent: Some(parent),
        rate,
        ceil: Some(ceil),
    }
}

fn root(rate: u64) -> Class {
    Class {
        key: "root",
        parent: None,
        rate,
        ceil: None,
    }
}

impl Scenario {
    fn class(&self, key: &str) -> &Class {
        self.classes.iter().find(|c| c.key == key).expect("a class")
    }

    fn path(&self, leaf: &'static str) -> Vec<&'static str> {
        let mut path = vec![leaf];
        while let Some(parent) = self.class(path[path.len() - 1]).parent {
            path.push(parent);
        }
        path
    }

    /// RL.SHARE's arguments for `leaf`'s path.
    fn args(&self, leaf: &'static str) -> Vec<String> {
        let path = self.path(leaf);
        let mut args = vec![path.len().to_string()];
        args.extend(path.iter().map(|k| k.to_string()));
        for key in &path {
            let c = self.class(key);
            args.extend([c.rate.to_string(), format!("{}ms", self.period_us / 1_000)]);
            if let Some(ceil) = c.ceil {
                args.extend(["CEIL".to_string(), ceil.to_string()]);
            }
        }
        args
    }

    /// HTB's fluid split: per leaf, its share per period.
    fn htb(&self) -> HashMap<&'static str, f64> {
        let load: HashMap<&str, f64> = self.loads.iter().copied().collect();
        let mut got = HashMap::new();
        self.split("root", self.class("root").rate as f64, &load, &mut got);
        got
    }

    fn children(&self, key: &str) -> Vec<&Class> {
        self.classes
            .iter()
            .filter(|c| c.parent == Some(key))
            .collect()
    }

    /// What `key`'s subtree asks for, within the ceilings.
    fn demand(&self, key: &str, load: &HashMap<&str, f64>) -> f64 {
        let kids = self.children(key);
        let asked = if kids.is_empty() {
            load.get(key).copied().unwrap_or(0.0)
        } else {
            kids.iter().map(|k| self.demand(k.key, load)).sum()
        };
        asked.min(self.class(key).ceil.map_or(f64::MAX, |c| c as f64))
    }

    fn split(
        &self,
        key: &'static str,
        capacity: f64,
        load: &HashMap<&str, f64>,
        got: &mut HashMap<&'static str, f64>,
    ) {
        let kids = self.children(key);
        if kids.is_empty() {
            got.insert(key, capacity);
            return;
        }
        let want: Vec<f64> = kids.iter().map(|k| self.demand(k.key, load)).collect();
        // Each its rate first (whatever the parent has: a class within its
        // rate never asks its parent), then the spare by rate.
        let mut share: Vec<f64> = (kids.iter().zip(&want))
            .map(|(k, &w)| w.min(k.rate as f64))
            .collect();
        let mut spare = capacity - share.iter().sum::<f64>();
        while spare > 1e-9 {
            let asking: Vec<usize> = (0..kids.len())
                .filter(|&i| share[i] < want[i] - 1e-9)
                .collect();
            if asking.is_empty() {
                break;
            }
            let weight: f64 = asking.iter().map(|&i| kids[i].rate as f64).sum();
            let mut used = 0.0;
            for &i in &asking {
                let add = (spare * kids[i].rate as f64 / weight).min(want[i] - share[i]);
                share[i] += add;
                used += add;
            }
            spare -= used;
        }
        for (k, s) in kids.iter().zip(share) {
            self.split(k.key, s, load, got);
        }
    }

    /// RL.SHARE under the Poisson load: per leaf, the units admitted in
    /// each period. A leaf in `stops` sends only for its periods.
    fn share(&self, seed: u64, stops: &[(&str, u64)]) -> HashMap<&'static str, Vec<u64>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut arrivals: Vec<(u64, usize)> = Vec::new();
        for (leaf, &(name, load)) in self.loads.iter().enumerate() {
            let periods = stops
                .iter()
                .find(|s| s.0 == name)
                .map_or(self.periods, |s| s.1);
            let end = (self.period_us * periods) as f64;
            let mean_gap = self.period_us as f64 / load;
            let mut t = 0.0;
            loop {
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                t += -u.ln() * mean_gap;
                if t >= end {
                    break;
                }
                arrivals.push((t as u64, leaf));
            }
        }
        arrivals.sort();
        self.replay(&arrivals)
    }

    /// RL.SHARE's admissions per leaf and period for `arrivals` (time from
    /// the start, leaf index), each key expiring as Redis would expire it.
    fn replay(&self, arrivals: &[(u64, usize)]) -> HashMap<&'static str, Vec<u64>> {
        let calls: Vec<(Vec<&str>, Vec<Policy>)> = self
            .loads
            .iter()
            .map(|&(leaf, _)| {
                let call = api::parse_share(&self.args(leaf)).expect("RL.SHARE");
                (self.path(leaf), call.nodes)
            })
            .collect();
        let mut keys: HashMap<&str, (Vec<u8>, u64)> = HashMap::new();
        let mut got: HashMap<&'static str, Vec<u64>> = self
            .loads
            .iter()
            .map(|&(leaf, _)| (leaf, vec![0; self.periods as usize]))
            .collect();
        for &(t, leaf) in arrivals {
            let now = START_US + t;
            let (path, nodes) = &calls[leaf];
            let mut store = api::MemoryStore::new(path.len());
            for (i, key) in path.iter().enumerate() {
                store.values[i] = keys
                    .get(key)
                    .filter(|(_, expires)| *expires > now)
                    .map(|(v, _)| v.clone());
            }
            let out = api::decide(
                &mut store,
                nodes,
                Micros::new(now),
                &api::Request::default(),
            )
            .expect("a decision");
            if out.allowed {
                got.get_mut(self.loads[leaf].0).expect("a leaf")[(t / self.period_us) as usize] +=
                    1;
            }
            for (i, key) in path.iter().enumerate() {
                if let (Some(v), Some(ttl)) = (&store.values[i], store.ttls[i]) {
                    keys.insert(key, (v.clone(), now + ttl.as_u64()));
                }
            }
        }
        got
    }
}

fn steady(name: &'static str, classes: Vec<Class>, loads: Vec<(&'static str, f64)>) -> Scenario {
    Scenario {
        name,
        period_us: 1_000_000,
        periods: 55,
        classes,
        loads,
    }
}

fn scenarios() -> Vec<Scenario> {
    let two_levels = || {
        vec![
            root(100),
            class("a", "root", 10, 100),
            class("b", "root", 20, 100),
            class("c", "root", 30, 100),
        ]
    };
    let three_levels = || {
        vec![
            root(100),
            class("x", "root", 40, 100),
            class("y", "root", 20, 100),
            class("a", "x", 20, 100),
            class("b", "x", 10, 100),
            class("c", "y", 10, 100),
            class("d", "y", 10, 100),
        ]
    };
    vec![
        steady(
            "assured rates below the parent, equal load (60 each)",
            two_levels(),
            vec![("a", 60.0), ("b", 60.0), ("c", 60.0)],
        ),
        steady(
            "the same, child a offers 6.6x more (396; 60; 60)",
            two_levels(),
            vec![("a", 396.0), ("b", 60.0), ("c", 60.0)],
        ),
        steady(
            "three levels: x 40 (a 20, b 10), y 20 (c 10, d 10); loads 60, 60, 60, 5",
            three_levels(),
            vec![("a", 60.0), ("b", 60.0), ("c", 60.0), ("d", 5.0)],
        ),
        steady(
            "three levels, a offers 6.6x more (396; 60; 60; 5)",
            three_levels(),
            vec![("a", 396.0), ("b", 60.0), ("c", 60.0), ("d", 5.0)],
        ),
    ]
}

/// Two children assured 60 an hour each (ceilings 100) under a root of
/// 100 an hour, a offering 200 an hour and b 100 for 10 hours; then b
/// stops and a goes on for 6 hours: what a got while both sent, and in
/// each hour after.
fn overcommitted() -> (Vec<u64>, Vec<u64>) {
    let s = Scenario {
        name: "overcommitted",
        period_us: 3_600_000_000,
        periods: 16,
        classes: vec![
            root(100),
            class("a", "root", 60, 100),
            class("b", "root", 60, 100),
        ],
        loads: vec![("a", 200.0), ("b", 100.0)],
    };
    let got = s.share(7, &[("b", 10)]);
    (got["a"][10..].to_vec(), got["a"][..10].to_vec())
}

fn main() {
    println!(
        "| scenario | leaf | offered | RL.SHARE | HTB (fluid) | RL.SHARE / HTB | \
         RL.SHARE after the first period | its ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for s in scenarios() {
        let htb = s.htb();
        let got = s.share(1, &[]);
        for &(leaf, load) in &s.loads {
            let per_period = got[leaf].iter().sum::<u64>() as f64 / s.periods as f64;
            // Without the first period, where every bucket starts full.
            let steady = got[leaf][1..].iter().sum::<u64>() as f64 / (s.periods - 1) as f64;
            let fluid = htb[leaf];
            println!(
                "| {} | {leaf} | {load} | {per_period:.1} | {fluid:.1} | {:.3} | {steady:.1} | {:.3} |",
                s.name,
                per_period / fluid,
                steady / fluid
            );
        }
    }
    let (after, before) = overcommitted();
    println!();
    println!(
        "Overcommitted (a, b assured 60/h, ceilings 100/h, root 100/h; a offers 200/h, b 100/h \
         for 10 h, then b stops): a got {before:?} an hour while both sent, then {after:?} an \
         hour (HTB: 60 an hour while both send, then 100 an hour from the first hour, its debt \
         capped by mbuffer, 60 s)."
    );
}
