//! RL.SKETCH as a policy: the count-min sketch deciding for one item, read
//! in place and patched ([`codec::sketch`]). A sketch is neither refunded
//! nor forced: lowering counters that other items share could under-count
//! them, and a debt in a shared counter is every colliding item's debt
//! (the grammar refuses both; the [`Limiter`] defaults change nothing).

use super::{Limiter, StateWrite, Transition};
use crate::algorithm::sketch::Sketch;
use crate::algorithm::Micros;
use crate::codec::sketch::StoredSketch;
use crate::codec::{self, Kind, Mismatch, StateError};

/// A sketch and the item a call decides for, borrowed from the policy.
pub struct ItemSketch<'a> {
    pub sketch: &'a Sketch,
    pub item: &'a [u8],
}

impl Limiter for ItemSketch<'_> {
    fn interval(&self) -> Option<Micros> {
        Some(self.sketch.interval())
    }

    fn kind(&self) -> Kind {
        Kind::Sketch
    }

    /// A sketch stored with another WIDTH, DEPTH or window is an error,
    /// never reinterpreted.
    fn decide(
        &self,
        stored: Option<&[u8]>,
        now: Micros,
        cost: u64,
    ) -> Result<Transition, StateError> {
        let sketch = self.sketch;
        let found = stored.map(StoredSketch::decode).transpose()?;
        if let Some(m) = found.as_ref().and_then(|s| mismatch(sketch, s)) {
            return Err(StateError::Mismatch(m));
        }
        let (decision, change) = sketch.decide(found.as_ref(), self.item, now, cost);
        let write =
            change.map(|c| StateWrite::Patch(codec::sketch::patch(sketch, &c, found.is_none())));
        Ok(Transition::of(decision, write))
    }
}

/// The first parameter in which the stored sketch differs from `sketch`.
fn mismatch(sketch: &Sketch, s: &StoredSketch) -> Option<Mismatch> {
    let mismatch = |param, stored: usize, given: usize| Mismatch {
        kind: Kind::Sketch,
        param,
        stored: stored as u64,
        given: given as u64,
        duration: false,
    };
    if s.width != sketch.width() {
        Some(mismatch("WIDTH", s.width, sketch.width()))
    } else if s.depth != sketch.depth() {
        Some(mismatch("DEPTH", s.depth, sketch.depth()))
    } else if s.window != sketch.window() {
        Some(Mismatch {
            param: "window",
            stored: s.window.as_u64(),
            given: sketch.window().as_u64(),
            duration: true,
            ..mismatch("", 0, 0)
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;

    #[test]
    fn a_sketch_with_other_parameters_is_an_error_naming_the_mismatch() {
        let minute = Micros::from_secs(60);
        let sketch = |w, d, window| Policy::Sketch {
            sketch: Sketch::new(5, window, w, d),
            item: b"ip".to_vec(),
        };
        let mut value = None;
        let out = sketch(16, 2, minute).decide(None, minute, 1).unwrap();
        out.write.unwrap().apply_to(&mut value);
        let value = value.unwrap();
        assert_eq!(value.len(), 26 + 12 * 32);
        let err = |p: Policy| {
            let e = p.decide(Some(&value), minute, 1).unwrap_err();
            crate::engine::error::Error::state("RL.SKETCH", e).to_string()
        };
        assert_eq!(
            err(sketch(8, 2, minute)),
            "WRONGTYPE key holds RL.SKETCH state with WIDTH 16, not 8"
        );
        assert_eq!(
            err(sketch(16, 3, minute)),
            "WRONGTYPE key holds RL.SKETCH state with DEPTH 2, not 3"
        );
        assert_eq!(
            err(sketch(16, 2, Micros::from_millis(1500))),
            "WRONGTYPE key holds RL.SKETCH state with window 60000ms, not 1500ms"
        );
        // Another limit on the same sketch is fine.
        let other_limit = Policy::Sketch {
            sketch: Sketch::new(9, minute, 16, 2),
            item: b"ip".to_vec(),
        };
        let d = other_limit
            .decide(Some(&value), minute, 1)
            .unwrap()
            .decision;
        assert_eq!(d.remaining, 7);
    }
}
