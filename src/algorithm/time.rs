//! TEMPORARY stand-in until the core's time type lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Micros(u64);
impl Micros {
    pub const ZERO: Micros = Micros(0);
    pub const MAX: Micros = Micros(u64::MAX);
    pub const fn new(us: u64) -> Micros {
        Micros(us)
    }
    pub const fn get(self) -> u64 {
        self.0
    }
    pub const fn from_millis(ms: u64) -> Micros {
        Micros(ms.saturating_mul(1_000))
    }
    pub const fn from_secs(s: u64) -> Micros {
        Micros(s.saturating_mul(1_000_000))
    }
    pub const fn ceil_millis(self) -> u64 {
        self.0.div_ceil(1_000)
    }
}
