//! Feeds arbitrary bytes to the composite snapshot decoder: it must return `Ok` or `Err`
//! without panicking, decode canonically (what decodes re-encodes to the same bytes), and
//! decode in place over an earlier value exactly as it decodes fresh.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tickwire_wire::fixtures::{SampleEvent, SamplePlayer, SampleSnapshot};
use tickwire_wire::{decode_exact, decode_exact_in_place, encode_to_vec};

fuzz_target!(|data: &[u8]| {
    let fresh = decode_exact::<SampleSnapshot>(data);

    let mut reused = SampleSnapshot {
        tick: 7,
        players: vec![SamplePlayer {
            name: Some("previous".into()),
            ..SamplePlayer::default()
        }],
        events: vec![SampleEvent::Chat("earlier line".into()), SampleEvent::Ended],
        blob: vec![1, 2, 3],
    };
    let in_place = decode_exact_in_place(&mut reused, data);

    match (fresh, in_place) {
        (Ok(snapshot), Ok(())) => {
            let again = encode_to_vec(&snapshot).expect("a decoded snapshot re-encodes");
            assert_eq!(again, data, "decoding is not canonical");
            // Raw floats may be NaN, so compare encodings rather than values.
            let reused_bytes = encode_to_vec(&reused).expect("re-encodes");
            assert_eq!(reused_bytes, data, "in-place decode differs from fresh");
        }
        (Err(fresh), Err(in_place)) => assert_eq!(fresh.kind, in_place.kind),
        (fresh, in_place) => panic!("fresh {fresh:?} but in place {in_place:?}"),
    }
});
