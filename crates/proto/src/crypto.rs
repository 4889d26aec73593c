//! ChaCha20-Poly1305 (IETF, 96-bit nonce): the one AEAD every encrypted packet, connect
//! token and challenge token uses. Through `ring`, but for the server's payload packets,
//! which are sealed many at a time by `tickwire_aead` (the same bytes; see `staged`).

use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};

/// Which code seals the server's payload packets, many at a time
/// ([`SealBackend::detect`] says what this processor gets): for the operator's log.
pub use tickwire_aead::Backend as SealBackend;

/// Bytes in a key.
pub const KEY_BYTES: usize = 32;
/// Bytes the authentication tag adds to a sealed message.
pub const TAG_BYTES: usize = 16;
/// Bytes in a nonce.
pub const NONCE_BYTES: usize = 12;

/// A 256-bit symmetric key.
#[derive(Clone, PartialEq, Eq)]
pub struct Key(pub [u8; KEY_BYTES]);

impl Key {
    /// A fresh random key.
    pub fn random(rng: &mut (impl rand::CryptoRng + ?Sized)) -> Self {
        let mut key = [0u8; KEY_BYTES];
        rng.fill_bytes(&mut key);
        Self(key)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys never reach logs.
        f.write_str("Key(..)")
    }
}

/// A key ready for sealing and opening.
pub(crate) struct Cipher(LessSafeKey);

impl Cipher {
    pub(crate) fn new(key: &Key) -> Self {
        // CHACHA20_POLY1305 takes any 32-byte key, so this cannot fail.
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &key.0)
            .unwrap_or_else(|_| unreachable!("ChaCha20-Poly1305 accepts every 32-byte key"));
        Self(LessSafeKey::new(unbound))
    }

    /// Encrypts `buf[..len - TAG_BYTES]` in place and writes the tag into its last
    /// `TAG_BYTES` bytes. `buf.len()` must be at least `TAG_BYTES`.
    pub(crate) fn seal(&self, nonce: [u8; NONCE_BYTES], aad: &[u8], buf: &mut [u8]) {
        let (plaintext, tag_out) = buf.split_at_mut(buf.len() - TAG_BYTES);
        let tag = self
            .0
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                plaintext,
            )
            .unwrap_or_else(|_| unreachable!("sealing fails only past 2^38 bytes"));
        tag_out.copy_from_slice(tag.as_ref());
    }

    /// Checks and decrypts `buf` (ciphertext then tag) in place; returns the plaintext's
    /// length, or `None` when the tag does not match (wrong key, nonce, data or tampering).
    pub(crate) fn open(
        &self,
        nonce: [u8; NONCE_BYTES],
        aad: &[u8],
        buf: &mut [u8],
    ) -> Option<usize> {
        if buf.len() < TAG_BYTES {
            return None;
        }
        self.0
            .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad), buf)
            .ok()
            .map(|plaintext| plaintext.len())
    }
}

/// The nonce of an encrypted packet: four zero bytes, then the packet's 64-bit sequence
/// little-endian. Each direction has its own key, so sequences may repeat across directions.
pub(crate) fn sequence_nonce(sequence: u64) -> [u8; NONCE_BYTES] {
    let mut nonce = [0u8; NONCE_BYTES];
    nonce[4..].copy_from_slice(&sequence.to_le_bytes());
    nonce
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_data_opens_only_with_the_same_key_nonce_and_aad() {
        let cipher = Cipher::new(&Key([7; KEY_BYTES]));
        let mut buf = *b"hello, arena!\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0";
        let len = buf.len();
        cipher.seal(sequence_nonce(5), b"header", &mut buf);
        assert_ne!(&buf[..13], b"hello, arena!", "the plaintext is encrypted");

        let mut copy = buf;
        assert_eq!(
            cipher.open(sequence_nonce(5), b"header", &mut copy),
            Some(len - TAG_BYTES)
        );
        assert_eq!(&copy[..13], b"hello, arena!");

        let mut copy = buf;
        assert_eq!(
            cipher.open(sequence_nonce(6), b"header", &mut copy),
            None,
            "wrong nonce"
        );
        let mut copy = buf;
        assert_eq!(
            cipher.open(sequence_nonce(5), b"HEADER", &mut copy),
            None,
            "wrong aad"
        );
        let mut copy = buf;
        copy[0] ^= 1;
        assert_eq!(
            cipher.open(sequence_nonce(5), b"header", &mut copy),
            None,
            "tampered"
        );
        let other = Cipher::new(&Key([8; KEY_BYTES]));
        let mut copy = buf;
        assert_eq!(
            other.open(sequence_nonce(5), b"header", &mut copy),
            None,
            "wrong key"
        );
        assert_eq!(
            cipher.open(sequence_nonce(5), b"", &mut [0u8; 3]),
            None,
            "shorter than a tag"
        );
    }

    #[test]
    fn keys_stay_out_of_debug_output() {
        assert_eq!(format!("{:?}", Key([1; KEY_BYTES])), "Key(..)");
    }
}
