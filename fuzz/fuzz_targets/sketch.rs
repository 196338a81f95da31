//! RL.SKETCH's state decoder and decision on arbitrary stored bytes. The
//! first 24 bytes choose the limit, the time, the cost and the item; the
//! rest is the stored value. A value that decodes is decided on with its
//! own WIDTH, DEPTH and window (any other is refused before reading it);
//! an admitted request's patch must leave a value of the same size that
//! decodes again, under the same parameters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use redis_ratelimit::api::{sketch_codec, Micros, Policy, Sketch, StateError, StateWrite};

fn word(data: &[u8], i: usize) -> u64 {
    data.get(i * 8..i * 8 + 8)
        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()))
}

fuzz_target!(|data: &[u8]| {
    let (params, stored) = data.split_at(data.len().min(24));
    let (a, now, cost) = (word(params, 0), word(params, 1), word(params, 2) % 8);
    let limit = (a & 0xffff_ffff) + 1;
    let item = (a >> 32).to_le_bytes();
    let found = match sketch_codec::StoredSketch::decode(stored) {
        Ok(found) => found,
        Err(StateError::Mismatch(m)) => panic!("the decoder checks no parameters: {m:?}"),
        Err(_) => return,
    };
    assert_eq!(
        stored.len(),
        sketch_codec::sketch_len(found.width, found.depth)
    );
    let sketch = Sketch::new(limit, found.window, found.width as u64, found.depth as u64);
    let policy = Policy::Sketch {
        sketch,
        item: item.to_vec(),
    };
    let out = policy
        .decide(Some(stored), Micros::new(now), cost)
        .expect("its own parameters");
    let d = out.decision;
    assert!(d.remaining <= d.limit);
    assert_eq!(out.write.is_some(), d.allowed && cost > 0);
    if let Some(write) = out.write {
        assert!(matches!(write, StateWrite::Patch(_)));
        let mut value = Some(stored.to_vec());
        write.apply_to(&mut value);
        let value = value.unwrap();
        assert_eq!(value.len(), stored.len());
        let again = sketch_codec::StoredSketch::decode(&value).expect("still a sketch");
        assert_eq!((again.width, again.depth), (found.width, found.depth));
    }
});
