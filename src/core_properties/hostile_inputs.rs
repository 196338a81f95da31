//! Property tests of the pure core over the full input ranges: the
//! schedule (GCRA and token bucket), redis-cell's arithmetic, the state
//! codec and the argument parsers. No panics (debug builds check every
//! overflow), no wraparound, and the invariants each reply promises.

use crate::algorithm::cell::{Cell, CellGiveBack};
use crate::algorithm::limits::{MAX_COUNT, MAX_DURATION};
use crate::algorithm::schedule::{Schedule, ScheduleError, Tat};
use crate::algorithm::{Micros, RetryAfter, MAX_HORIZON};
use crate::api::{parse, parse_throttle};
use crate::codec::cell::decode_cell_state;
use crate::codec::{decode_tat, encode_tat, Kind, StateError, TAT_MAX_LEN};
use crate::commands::args::{duration, integer};
use crate::policy::Policy;
use proptest::collection::vec;
use proptest::prelude::*;

/// The longest duration an argument may give, in milliseconds.
const MAX_DURATION_MS: u64 = MAX_DURATION.as_u64() / 1_000;

/// The latest time the clock shows.
const END_US: u64 = i64::MAX as u64;
/// CL.THROTTLE's longest period, in seconds, and its horizon.
const CELL_MAX_PERIOD_S: u64 = 36_500 * 86_400;
const CELL_MAX_TOLERANCE_NS: i128 = 100 * 365 * 86_400 * 1_000_000_000;

/// Any u64, with the edges and small values well represented.
fn wide() -> impl Strategy<Value = u64> {
    prop_oneof![
        any::<u64>(),
        0..=1_000u64,
        Just(u64::MAX),
        Just(END_US),
        (0..=64u32).prop_map(|s| 1u64.checked_shl(s).unwrap_or(u64::MAX)),
    ]
}

fn tat() -> impl Strategy<Value = Tat> {
    (wide(), wide(), wide()).prop_map(|(whole_us, frac_num, frac_den)| Tat {
        whole: Micros::new(whole_us),
        frac_num,
        frac_den,
    })
}

fn horizon_us(burst: u64, rate: u64, period: u64) -> u128 {
    let (b, r, p) = (burst.max(1), rate.max(1), period.max(1));
    (u128::from(b) * u128::from(p)).div_ceil(u128::from(r))
}

/// A schedule the commands can build (every horizon up to 1000 years).
fn schedule() -> impl Strategy<Value = (u64, u64, u64)> {
    (1..=MAX_COUNT, 1..=MAX_COUNT, 1..=MAX_DURATION_MS * 1_000)
        .prop_filter("horizon", |&(b, r, p)| {
            horizon_us(b, r, p) <= u128::from(MAX_HORIZON.as_u64())
        })
        .boxed()
        .prop_union(
            // Small rates and bursts, where admissions actually happen.
            (1..=50u64, 1..=50u64, 1..=10_000_000u64).boxed(),
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn schedule_accepts_exactly_the_horizons_up_to_1000_years(
        burst in wide(), rate in wide(), period in wide()
    ) {
        let got = Schedule::new(burst, rate, Micros::new(period));
        let fits = horizon_us(burst, rate, period) <= u128::from(MAX_HORIZON.as_u64());
        prop_assert_eq!(got.is_ok(), fits);
        if !fits {
            prop_assert_eq!(got, Err(ScheduleError::HorizonTooLong));
        }
    }

    /// Any stored state (even hostile), any time, any cost: no panic, and
    /// the reply keeps its promises.
    #[test]
    fn schedule_decisions_keep_their_promises(
        (burst, rate, period) in schedule(),
        stored in proptest::option::of(tat()),
        now in wide(),
        cost in wide(),
    ) {
        let s = Schedule::new(burst, rate, Micros::new(period)).unwrap();
        let (d, new) = s.decide(stored, Micros::new(now), cost);
        prop_assert_eq!(d.limit, burst);
        prop_assert!(d.remaining <= burst);
        prop_assert_eq!(new.is_some(), d.allowed && cost > 0);
        prop_assert_eq!(d.retry_after == RetryAfter::NotNeeded, d.allowed);
        if cost == 0 {
            prop_assert!(d.allowed);
        }
        if cost > burst {
            prop_assert_eq!(d.retry_after, RetryAfter::Never);
        }
        if let Some(t) = new {
            prop_assert!(t.frac_num == 0 || t.frac_num < t.frac_den);
        }
        // From a state the limiter wrote itself: never further ahead than
        // its horizon, never behind now (no wraparound).
        if stored.is_none() && now <= END_US {
            prop_assert!(u128::from(d.reset_after.as_u64()) <= horizon_us(burst, rate, period));
            if let Some(t) = new {
                prop_assert!(t.whole.as_u64() >= now);
                prop_assert!(u128::from(t.whole.as_u64()) <= u128::from(now) + horizon_us(burst, rate, period));
            }
        }
    }

    /// Over any timeline from a fresh key, the admitted cost never exceeds
    /// the burst plus what the rate earned meanwhile.
    #[test]
    fn schedule_never_admits_more_than_burst_plus_rate(
        (burst, rate, period) in (1..=20u64, 1..=20u64, 1..=5_000_000u64),
        start in 0..=END_US - 1_000_000_000_000,
        steps in vec((0..=2_000_000u64, 0..=25u64), 1..60),
    ) {
        let s = Schedule::new(burst, rate, Micros::new(period)).unwrap();
        let (mut now, mut state, mut admitted) = (start, None, 0u128);
        for (dt, cost) in steps {
            now += dt;
            let (d, new) = s.decide(state, Micros::new(now), cost);
            if d.allowed {
                admitted += u128::from(cost);
            }
            if let Some(t) = new {
                state = Some(t);
            }
            // Requests are timed in whole microseconds: a request at `now`
            // may use a TAT up to 1 µs earlier.
            let earned = (u128::from(now - start) + 1) * u128::from(rate) / u128::from(period);
            prop_assert!(
                admitted <= u128::from(burst) + earned,
                "admitted {} > burst {} + earned {}", admitted, burst, earned
            );
        }
    }

    #[test]
    fn cell_over_every_accepted_parameter(
        max_burst in 0..=MAX_COUNT - 1,
        count in 1..=MAX_COUNT,
        period in 1..=CELL_MAX_PERIOD_S,
        stored in proptest::option::of(0..=i64::MAX),
        now in 0..=i64::MAX,
        quantity in prop_oneof![0..=10i64, 0..=i64::MAX],
    ) {
        let to_i64 = |x: u64| i64::try_from(x).unwrap();
        let Ok(c) = Cell::new(to_i64(max_burst), to_i64(count), to_i64(period), CELL_MAX_TOLERANCE_NS) else {
            return Ok(());
        };
        let (r, w) = c.throttle(stored, now, quantity);
        prop_assert_eq!(i128::from(r.limit), i128::from(max_burst) + 1);
        prop_assert!(r.remaining >= 0 && r.remaining < 2 * r.limit.max(1), "{:?}", r);
        prop_assert!(r.reset_after_s >= 0 && r.retry_after_s >= -1, "{:?}", r);
        prop_assert_eq!(w.is_some(), !r.limited && quantity > 0);
        if let Some(w) = w {
            prop_assert!(w.ttl_ns >= 0 && i128::from(w.ttl_ns) <= c.tolerance_ns());
            // Where the command lets it run, the TAT is exact.
            if i128::from(now) + c.tolerance_ns() <= i128::from(i64::MAX) {
                prop_assert_eq!(i128::from(w.tat_ns), i128::from(now) + i128::from(w.ttl_ns));
            }
        }
    }

    /// A give-back of what an admitted request took leaves the limiter as
    /// it was (a TAT in the past is full, as no key is); any give-back
    /// stops at full and never panics.
    #[test]
    fn cell_give_back_undoes_an_admission_exactly(
        max_burst in 0..=MAX_COUNT - 1,
        count in 1..=MAX_COUNT,
        period in 1..=CELL_MAX_PERIOD_S,
        stored in proptest::option::of(0..=i64::MAX),
        now in 0..=i64::MAX / 2,
        quantity in prop_oneof![1..=10i64, 1..=i64::MAX],
        extra in 0..=3i64,
    ) {
        let to_i64 = |x: u64| i64::try_from(x).unwrap();
        let Ok(c) = Cell::new(to_i64(max_burst), to_i64(count), to_i64(period), CELL_MAX_TOLERANCE_NS) else {
            return Ok(());
        };
        if i128::from(now) + c.tolerance_ns() > i128::from(i64::MAX) {
            return Ok(());
        }
        let (_, w) = c.throttle(stored, now, quantity);
        let Some(w) = w else { return Ok(()) };
        let before = stored.filter(|&t| t > now);
        let (r, g) = c.give_back(Some(w.tat_ns), now, quantity);
        match before {
            Some(t) => prop_assert_eq!(g, CellGiveBack::Tat(cell_write(t, now))),
            None => prop_assert_eq!(g, CellGiveBack::Full),
        }
        prop_assert_eq!(r, c.throttle(before, now, 0).0);
        // More than was taken stops at full.
        let (_, g) = c.give_back(Some(w.tat_ns), now, quantity.saturating_add(extra));
        if extra > 0 && before.is_none() {
            prop_assert_eq!(g, CellGiveBack::Full);
        }
    }

    /// A stored TAT close to now, as a changed limit leaves it: within a
    /// few intervals either side of now and of the tolerance.
    #[test]
    fn cell_with_a_tat_near_now(
        max_burst in 0..=20i64,
        count in 1..=1_000_000_000i64,
        period in 1..=100i64,
        now in 0..=i64::MAX / 2,
        (base, sixteenths, ns) in (0..3usize, -40..=40i128, -2_000..=2_000i128),
        quantity in 0..=30i64,
    ) {
        let Ok(c) = Cell::new(max_burst, count, period, CELL_MAX_TOLERANCE_NS) else {
            return Ok(());
        };
        // Around now, around the tolerance, or around one interval.
        let interval = c.tolerance_ns() / i128::from(max_burst + 1);
        let base = [0, c.tolerance_ns(), interval][base];
        let offset = base + sixteenths * interval / 16 + ns;
        let stored = i64::try_from((i128::from(now) + offset).max(0)).unwrap();
        let (r, w) = c.throttle(Some(stored), now, quantity);
        prop_assert!(r.remaining >= 0 && r.remaining < 2 * r.limit, "{:?}", r);
        prop_assert!(r.reset_after_s >= 0 && r.retry_after_s >= -1, "{:?}", r);
        prop_assert_eq!(w.is_some(), !r.limited && quantity > 0);
    }

    #[test]
    fn tat_codec_round_trips_and_rejects_what_it_did_not_write(
        t in tat(), kind in 0..Kind::ALL.len(), bytes in vec(any::<u8>(), 0..32)
    ) {
        let kind = Kind::ALL[kind];
        let t = if t.frac_num == 0 || t.frac_num >= t.frac_den {
            Tat::whole(t.whole)
        } else {
            t
        };
        let mut buf = [0; TAT_MAX_LEN];
        let n = encode_tat(kind, t, &mut buf);
        prop_assert_eq!(buf[0], kind.tag());
        prop_assert_eq!(decode_tat(&buf[..n], kind), Ok(t));
        for other in Kind::ALL.into_iter().filter(|k| *k != kind) {
            prop_assert_eq!(decode_tat(&buf[..n], other), Err(StateError::OtherKind(kind)));
        }
        // Arbitrary bytes: a decoded TAT is proper and re-encodes to a value
        // that decodes the same.
        match decode_tat(&bytes, kind) {
            Ok(d) => {
                // Its own tag, or that of the kind's earlier layout.
                prop_assert!(bytes[0] == kind.tag() || Some(bytes[0]) == kind.earlier_tag() || Some(bytes[0]) == kind.paced_tag());
                prop_assert!(d.frac_num == 0 || (d.frac_num < d.frac_den));
                let n = encode_tat(kind, d, &mut buf);
                prop_assert_eq!(decode_tat(&buf[..n], kind), Ok(d));
            }
            Err(StateError::Foreign) => prop_assert!(Kind::of(&bytes).is_none()),
            Err(StateError::OtherKind(k)) => prop_assert_eq!(Kind::of(&bytes), Some(k)),
            Err(StateError::Corrupt(k)) => prop_assert_eq!(k, kind),
            Err(StateError::Mismatch(m)) => prop_assert!(false, "a TAT has no parameters: {:?}", m),
        }
    }

    #[test]
    fn cell_state_is_a_decimal_i64(bytes in vec(any::<u8>(), 0..24), n in 0..=i64::MAX) {
        prop_assert_eq!(decode_cell_state(n.to_string().as_bytes()), Ok(n));
        if let Ok(v) = decode_cell_state(&bytes) {
            prop_assert!(bytes.iter().all(u8::is_ascii_digit));
            let text = std::str::from_utf8(&bytes).unwrap();
            prop_assert_eq!(Ok(v), text.parse::<i64>());
        }
    }

    #[test]
    fn integers_parse_exactly_digits_in_range(
        bytes in vec(any::<u8>(), 0..24),
        n in wide(),
        zeros in 0..3usize,
        (min, max) in (wide(), wide()).prop_map(|(a, b)| (a.min(b), a.max(b))),
    ) {
        let text = format!("{}{n}", "0".repeat(zeros));
        let want = if n >= min && n <= max { Some(n) } else { None };
        prop_assert_eq!(integer(text.as_bytes(), "x", min, max).ok(), want);
        let reference = std::str::from_utf8(&bytes)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok())
            .filter(|v| *v >= min && *v <= max);
        prop_assert_eq!(integer(&bytes, "x", min, max).ok(), reference);
    }

    #[test]
    fn durations_parse_every_unit_up_to_36500_days(
        n in wide(), unit in 0..12usize, bytes in vec(any::<u8>(), 0..16)
    ) {
        let units: [(&str, u128); 12] = [
            ("", 1_000), ("s", 1_000), ("S", 1_000), ("ms", 1), ("MS", 1), ("Ms", 1),
            ("m", 60_000), ("M", 60_000), ("h", 3_600_000), ("H", 3_600_000),
            ("d", 86_400_000), ("D", 86_400_000),
        ];
        let (suffix, ms) = units[unit];
        let text = format!("{n}{suffix}");
        let total_ms = u128::from(n) * ms;
        let got = duration(text.as_bytes(), "period");
        if n == 0 {
            prop_assert!(got.is_err());
        } else if total_ms > u128::from(MAX_DURATION_MS) {
            prop_assert_eq!(got.unwrap_err().to_string(), "ERR period must be at most 36500d");
        } else {
            prop_assert_eq!(got, Ok(Micros::new(u64::try_from(total_ms * 1_000).unwrap())));
        }
        if let Ok(us) = duration(&bytes, "period").map(Micros::as_u64) {
            prop_assert!((1_000..=MAX_DURATION_MS * 1_000).contains(&us) && us % 1_000 == 0);
        }
    }

    /// The command parsers on arbitrary argument lists: an `Ok` or an error
    /// that starts with `ERR`, never a panic.
    #[test]
    fn parsers_take_any_arguments(args in vec(argument(), 0..8)) {
        let check = |e: Option<String>| e.is_none_or(|m| m.starts_with("ERR ") && !m.contains('\n'));
        prop_assert!(check(parse("RL.GCRA", &args).err().map(|e| e.to_string())));
        prop_assert!(check(parse("RL.BUCKET", &args).err().map(|e| e.to_string())));
        prop_assert!(check(parse_throttle(&args).err().map(|e| e.to_string())));
    }

    #[test]
    fn policies_decide_on_arbitrary_stored_bytes(
        bytes in vec(any::<u8>(), 0..40),
        tag in 0xA0..=0xA8u8,
        now in wide(),
        cost in wide(),
        (burst, rate, period) in schedule(),
    ) {
        let mut tagged = bytes.clone();
        tagged.insert(0, tag);
        let gcra = parse("RL.GCRA", &[rate.to_string(), format!("{}ms", (period / 1_000).max(1)), "BURST".into(), burst.to_string()]);
        let bucket = parse("RL.BUCKET", &[burst.to_string(), rate.to_string(), format!("{}ms", (period / 1_000).max(1))]);
        let policies: Vec<Policy> = [gcra, bucket].into_iter().filter_map(Result::ok).map(|(p, _)| p).collect();
        for p in policies {
            for stored in [&bytes[..], &tagged[..]] {
                if let Ok(out) = p.decide(Some(stored), Micros::new(now), cost) {
                    prop_assert_eq!(out.write.is_some(), out.decision.allowed && cost > 0);
                    prop_assert!(out.decision.remaining <= out.decision.limit);
                }
            }
        }
    }
}

/// Command arguments: mostly tokens the parsers know, sometimes any bytes.
fn argument() -> impl Strategy<Value = Vec<u8>> {
    let tokens: Vec<Vec<u8>> = [
        "1",
        "10",
        "0",
        "1s",
        "36500d",
        "36501d",
        "9223372036854775807",
        "9223372036854775808",
        "BURST",
        "COST",
        "DRYRUN",
        "burst",
        "-1",
        "",
        "1.5",
        "99999999999d",
    ]
    .iter()
    .map(|t| t.as_bytes().to_vec())
    .collect();
    prop_oneof![
        3 => proptest::sample::select(tokens),
        1 => vec(any::<u8>(), 0..12),
        1 => any::<u64>().prop_map(|n| n.to_string().into_bytes()),
    ]
}

fn cell_write(tat_ns: i64, now_ns: i64) -> crate::algorithm::cell::CellWrite {
    crate::algorithm::cell::CellWrite {
        tat_ns,
        ttl_ns: tat_ns - now_ns,
    }
}
