//! [`Micros`], the core's one unit of time.

/// Microseconds: an instant (counted from the Unix epoch) or a duration.
///
/// Every time the core takes, stores or returns is a `Micros`: the clock
/// reading, a period or window, a TAT, a log stamp, a wait. It becomes
/// milliseconds, seconds or nanoseconds only where it leaves the core: in a
/// reply, in a key's expiry, in CL.THROTTLE's nanosecond state.
///
/// There are no arithmetic operators: each use says what happens at the
/// ends of the range (`saturating_*`, `checked_*`), and an algorithm that
/// needs exact wide arithmetic unwraps to `u64` ([`Micros::as_u64`]) and
/// widens to `u128` locally.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Micros(u64);

const US_PER_MS: u64 = 1_000;
const US_PER_S: u64 = 1_000_000;

impl Micros {
    /// No time: the epoch, or a zero duration.
    pub const ZERO: Micros = Micros(0);
    /// The largest representable time (about 584,542 years).
    pub const MAX: Micros = Micros(u64::MAX);

    /// `us` microseconds.
    pub const fn new(us: u64) -> Micros {
        Micros(us)
    }

    /// The number of microseconds.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// `ms` milliseconds, saturating at [`Micros::MAX`].
    pub const fn from_millis(ms: u64) -> Micros {
        Micros(ms.saturating_mul(US_PER_MS))
    }

    /// `s` seconds, saturating at [`Micros::MAX`].
    pub const fn from_secs(s: u64) -> Micros {
        Micros(s.saturating_mul(US_PER_S))
    }

    /// Whole milliseconds, rounded up: a wait or a TTL is never reported
    /// shorter than it is.
    pub const fn ceil_millis(self) -> u64 {
        self.0.div_ceil(US_PER_MS)
    }

    /// `self + rhs`, or [`Micros::MAX`] if that overflows.
    pub const fn saturating_add(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, or [`Micros::ZERO`] if `rhs` is later or longer.
    pub const fn saturating_sub(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_sub(rhs.0))
    }

    /// `self + rhs`, or `None` if that overflows.
    pub const fn checked_add(self, rhs: Micros) -> Option<Micros> {
        match self.0.checked_add(rhs.0) {
            Some(us) => Some(Micros(us)),
            None => None,
        }
    }

    /// `self - rhs`, or `None` if `rhs` is later or longer.
    pub const fn checked_sub(self, rhs: Micros) -> Option<Micros> {
        match self.0.checked_sub(rhs.0) {
            Some(us) => Some(Micros(us)),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(Micros::from_millis(250), Micros::new(250_000));
        assert_eq!(Micros::from_secs(60).as_u64(), 60_000_000);
        assert_eq!(Micros::from_millis(u64::MAX), Micros::MAX);
        assert_eq!(Micros::from_secs(u64::MAX / 1_000), Micros::MAX);
        assert_eq!(Micros::default(), Micros::ZERO);
    }

    #[test]
    fn milliseconds_round_up() {
        assert_eq!(Micros::new(0).ceil_millis(), 0);
        assert_eq!(Micros::new(1).ceil_millis(), 1);
        assert_eq!(Micros::new(1_000).ceil_millis(), 1);
        assert_eq!(Micros::new(1_001).ceil_millis(), 2);
        assert_eq!(Micros::MAX.ceil_millis(), u64::MAX / 1_000 + 1);
    }

    #[test]
    fn arithmetic_at_the_ends_of_the_range() {
        let (one, two) = (Micros::new(1), Micros::new(2));
        assert_eq!(one.saturating_add(two), Micros::new(3));
        assert_eq!(Micros::MAX.saturating_add(one), Micros::MAX);
        assert_eq!(one.saturating_sub(two), Micros::ZERO);
        assert_eq!(two.saturating_sub(one), one);
        assert_eq!(one.checked_add(two), Some(Micros::new(3)));
        assert_eq!(Micros::MAX.checked_add(one), None);
        assert_eq!(two.checked_sub(one), Some(one));
        assert_eq!(one.checked_sub(two), None);
        assert!(one < two && Micros::ZERO < one && two < Micros::MAX);
    }
}
