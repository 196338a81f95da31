//! The long-run split of a parent's spare rate against HTB's fluid model:
//! Poisson arrivals of cost 1 at the leaves of a tree, decided by
//! [`decide`] over shared node states, against what HTB gives each leaf
//! (each class first what it asks up to its rate, then a parent's spare
//! rate to its children still asking in proportion to their rates, up to
//! their ceilings).

use super::tests::node;
use super::*;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};

const S: u64 = 1_000_000;
const T0: u64 = 1 << 40;

/// A class: its parent (index; none: the root), assured rate and ceiling
/// a second.
#[derive(Debug, Clone, Copy)]
pub struct Class {
    pub parent: Option<usize>,
    pub rate: u64,
    pub ceil: u64,
}

/// HTB's fluid split: per class, its share a second (leaves: what they
/// get), given each leaf's offered load a second.
pub fn htb(classes: &[Class], load: &[f64]) -> Vec<f64> {
    let kids = |p: usize| -> Vec<usize> {
        (0..classes.len())
            .filter(|&i| classes[i].parent == Some(p))
            .collect()
    };
    fn demand(classes: &[Class], load: &[f64], i: usize) -> f64 {
        let kids: Vec<usize> = (0..classes.len())
            .filter(|&k| classes[k].parent == Some(i))
            .collect();
        let asked = if kids.is_empty() {
            load[i]
        } else {
            kids.iter().map(|&k| demand(classes, load, k)).sum()
        };
        asked.min(classes[i].ceil as f64)
    }
    let mut got = vec![0.0; classes.len()];
    let root = classes.iter().position(|c| c.parent.is_none()).unwrap();
    got[root] = demand(classes, load, root).min(classes[root].rate as f64);
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        let ks = kids(p);
        let want: Vec<f64> = ks.iter().map(|&k| demand(classes, load, k)).collect();
        let mut share: Vec<f64> = (ks.iter().zip(&want))
            .map(|(&k, &w)| w.min(classes[k].rate as f64))
            .collect();
        let mut spare = got[p] - share.iter().sum::<f64>();
        while spare > 1e-9 {
            let asking: Vec<usize> = (0..ks.len())
                .filter(|&i| share[i] < want[i] - 1e-9)
                .collect();
            if asking.is_empty() {
                break;
            }
            let weight: f64 = asking.iter().map(|&i| classes[ks[i]].rate as f64).sum();
            let mut used = 0.0;
            for &i in &asking {
                let add = (spare * classes[ks[i]].rate as f64 / weight).min(want[i] - share[i]);
                share[i] += add;
                used += add;
            }
            spare -= used;
        }
        for (i, &k) in ks.iter().enumerate() {
            got[k] = share[i];
            todo.push(k);
        }
    }
    got
}

/// RL.SHARE's decisions under Poisson arrivals at `load[i]` a second at
/// every leaf `i` for `secs`: per class, the units a second its leaf got
/// (0 for inner classes). Bursts are each node's rate (the defaults).
pub fn share(classes: &[Class], load: &[f64], secs: u64, seed: u64) -> Vec<f64> {
    sent_and_got(classes, load, secs, seed).1
}

/// As [`share`], with the units a second each leaf sent: the offered
/// load as drawn, which HTB is given to compare alike (a leaf offering 5
/// a second sends 5 ± 0.16 over 200 s).
fn sent_and_got(classes: &[Class], load: &[f64], secs: u64, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let nodes: Vec<Node> = classes
        .iter()
        .map(|c| match c.parent {
            None => node(c.rate, S, c.rate, None),
            Some(_) => node(c.rate, S, c.rate, Some((c.ceil, c.rate))),
        })
        .collect();
    let path = |leaf: usize| {
        let mut p = vec![leaf];
        while let Some(up) = classes[p[p.len() - 1]].parent {
            p.push(up);
        }
        p
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut arrivals: Vec<(u64, usize)> = Vec::new();
    for (leaf, &l) in load.iter().enumerate() {
        if l <= 0.0 {
            continue;
        }
        let mut t = 0.0;
        loop {
            let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
            t += -u.ln() * S as f64 / l;
            if t >= (secs * S) as f64 {
                break;
            }
            arrivals.push((t as u64, leaf));
        }
    }
    let mut sent = vec![0u64; classes.len()];
    for &(_, leaf) in &arrivals {
        sent[leaf] += 1;
    }
    arrivals.sort();
    let mut states = vec![NodeState::default(); classes.len()];
    let mut got = vec![0u64; classes.len()];
    for (t, leaf) in arrivals {
        let p = path(leaf);
        let ns: Vec<Node> = p.iter().map(|&i| nodes[i]).collect();
        let ss: Vec<NodeState> = p.iter().map(|&i| states[i]).collect();
        let out = decide(&ns, &ss, Micros::new(T0 + t), 1);
        if out.allowed {
            got[leaf] += 1;
        }
        for (k, &i) in p.iter().enumerate() {
            if let Some(s) = out.nodes[k].1 {
                states[i] = s;
            }
        }
    }
    let per_sec = |v: &[u64]| v.iter().map(|&g| g as f64 / secs as f64).collect();
    (per_sec(&sent), per_sec(&got))
}

fn two_levels() -> Vec<Class> {
    let c = |rate| Class {
        parent: Some(3),
        rate,
        ceil: 100,
    };
    vec![
        c(10),
        c(20),
        c(30),
        Class {
            parent: None,
            rate: 100,
            ceil: 100,
        },
    ]
}

fn three_levels() -> Vec<Class> {
    let c = |parent, rate| Class {
        parent: Some(parent),
        rate,
        ceil: 100,
    };
    vec![
        c(4, 20), // a
        c(4, 10), // b
        c(5, 10), // c
        c(5, 10), // d
        c(6, 40), // x
        c(6, 20), // y
        Class {
            parent: None,
            rate: 100,
            ceil: 100,
        },
    ]
}

/// The worst ratio of RL.SHARE's split to HTB's over the leaves, HTB
/// given the load the leaves sent.
fn worst(classes: &[Class], load: &[f64], secs: u64, seed: u64) -> (f64, Vec<f64>, Vec<f64>) {
    let (sent, got) = sent_and_got(classes, load, secs, seed);
    let want = htb(classes, &sent);
    let worst = (0..load.len())
        .filter(|&i| load[i] > 0.0)
        .map(|i| (got[i] / want[i] - 1.0).abs())
        .fold(0.0, f64::max);
    (worst, got, want)
}

#[test]
#[ignore = "prints the split for a range of loads"]
fn print_splits() {
    for (name, classes, load) in [
        ("two, equal", two_levels(), vec![60.0, 60.0, 60.0, 0.0]),
        ("two, a 6.6x", two_levels(), vec![396.0, 60.0, 60.0, 0.0]),
        ("two, c 6.6x", two_levels(), vec![60.0, 60.0, 396.0, 0.0]),
        (
            "three, equal",
            three_levels(),
            vec![60.0, 60.0, 60.0, 5.0, 0.0, 0.0, 0.0],
        ),
        (
            "three, a 6.6x",
            three_levels(),
            vec![396.0, 60.0, 60.0, 5.0, 0.0, 0.0, 0.0],
        ),
        (
            "three, b 6.6x",
            three_levels(),
            vec![60.0, 396.0, 60.0, 5.0, 0.0, 0.0, 0.0],
        ),
    ] {
        let (w, got, want) = worst(&classes, &load, 200, 1);
        let n = load.iter().filter(|&&l| l > 0.0).count();
        eprintln!(
            "{name}: worst {w:.3} got {:?} want {:?}",
            got[..n]
                .iter()
                .map(|g| format!("{g:.1}"))
                .collect::<Vec<_>>(),
            want[..n]
                .iter()
                .map(|g| format!("{g:.1}"))
                .collect::<Vec<_>>()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// Two levels: three children of assured rates 3 to 33 under 100, each
    /// offering 60 a second (one of them up to 6.6 times more): each gets
    /// HTB's split within 10 % over 200 s (worst seen over 200 seeds of 12
    /// cases: see `sweep_the_property_domain`).
    #[test]
    fn two_levels_split_the_spare_rate_as_htb(
        rates in (3u64..40, 3u64..40, 3u64..40),
        skewed in 0usize..3, skew in 1.0f64..6.6, seed in any::<u64>(),
    ) {
        let (r, mut classes) = (100, two_levels());
        let rates = [rates.0, rates.1, rates.2];
        for (c, &rate) in classes.iter_mut().zip(&rates) {
            c.rate = rate.min(r / 3);
        }
        let mut load = vec![60.0, 60.0, 60.0, 0.0];
        load[skewed] *= skew;
        let (worst, got, want) = worst(&classes, &load, 200, seed);
        prop_assert!(worst <= 0.10, "{:?} vs HTB {:?}", got, want);
    }

    /// Three levels (x 40: a 20, b 10; y 20: c 10, d 10 under 100), any
    /// leaf offering up to 6.6 times more, d below its assured rate.
    #[test]
    fn three_levels_split_the_spare_rate_as_htb(
        skewed in 0usize..3, skew in 1.0f64..6.6, seed in any::<u64>(),
    ) {
        let mut load = vec![60.0, 60.0, 60.0, 5.0, 0.0, 0.0, 0.0];
        load[skewed] *= skew;
        let (worst, got, want) = worst(&three_levels(), &load, 200, seed);
        prop_assert!(worst <= 0.10, "{:?} vs HTB {:?}", got, want);
    }
}

/// A lone borrower still reaches its ceiling, and under contention busy
/// children keep their assured rates, whatever the load.
#[test]
fn a_lone_borrower_reaches_its_ceiling_and_the_assured_rates_hold() {
    let mut classes = two_levels();
    classes[0].ceil = 80;
    let alone = share(&classes, &[500.0, 0.0, 0.0, 0.0], 100, 3);
    assert!(alone[0] >= 79.0 && alone[0] <= 80.2, "{alone:?}");
    let busy = share(&classes, &[2_000.0, 60.0, 60.0, 0.0], 100, 4);
    assert!(busy[1] >= 20.0 && busy[2] >= 30.0, "{busy:?}");
}

/// The property domain swept: `SWEEP_SEEDS` seeds (default 200) of 12
/// cases each, of both trees, as the property tests draw them;
/// `SWEEP_MIN_RATE` (default 3) the least assured rate drawn,
/// `SWEEP_FROM` (default 0) the seed of the draws. Prints the worst error
/// and its case.
#[test]
#[ignore = "a long sweep of the property domain: run in release"]
fn sweep_the_property_domain() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let (seeds, min_rate) = (env("SWEEP_SEEDS", 200), env("SWEEP_MIN_RATE", 3));
    let mut rng = rand::rngs::StdRng::seed_from_u64(env("SWEEP_FROM", 0));
    let (mut worst2, mut worst3) = ((0.0, String::new()), (0.0, String::new()));
    let mut over = [0usize; 2];
    for _ in 0..seeds * 12 {
        let mut classes = two_levels();
        let rates: Vec<u64> = (0..3)
            .map(|_| rng.gen_range(min_rate..40).min(33))
            .collect();
        for (c, &rate) in classes.iter_mut().zip(&rates) {
            c.rate = rate;
        }
        let (skewed, skew, seed) = (rng.gen_range(0..3), rng.gen_range(1.0..6.6), rng.gen());
        let mut load = vec![60.0, 60.0, 60.0, 0.0];
        load[skewed] *= skew;
        let (w, got, want) = worst(&classes, &load, 200, seed);
        over[0] += usize::from(w > 0.10);
        if w > worst2.0 {
            worst2 = (
                w,
                format!("rates {rates:?} load {load:.1?} got {got:.1?} want {want:.1?}"),
            );
        }
        let (skewed, skew, seed) = (rng.gen_range(0..3), rng.gen_range(1.0..6.6), rng.gen());
        let mut load = vec![60.0, 60.0, 60.0, 5.0, 0.0, 0.0, 0.0];
        load[skewed] *= skew;
        let (w, got, want) = worst(&three_levels(), &load, 200, seed);
        over[1] += usize::from(w > 0.10);
        if w > worst3.0 {
            worst3 = (w, format!("load {load:.1?} got {got:.1?} want {want:.1?}"));
        }
    }
    eprintln!(
        "two levels: worst {:.3} ({} cases over 10 %): {}",
        worst2.0, over[0], worst2.1
    );
    eprintln!(
        "three levels: worst {:.3} ({} cases over 10 %): {}",
        worst3.0, over[1], worst3.1
    );
}
