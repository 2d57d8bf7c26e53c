//! Pairing: two appliances learn each other's key once, proving to each other
//! that they were given the same one-time token.
//!
//! The listener's admin makes a token (`cachalot replication pair`); the other
//! appliance connects with it (`cachalot replication pair HOST:PORT TOKEN`).
//! Over the TLS connection each side sends a MAC, keyed by the token, of both
//! certificate fingerprints in its own order. A man in the middle terminates
//! two TLS sessions with other fingerprints, so without the token he can make
//! neither MAC; the token never crosses the wire.
//!
//! Invariants: a token is used at most once and expires; proofs are compared
//! in constant time (`blake3::Hash`'s `==`).

/// Seconds a pairing token stays valid.
pub const TOKEN_LIFETIME: u64 = 3600;

/// The proof that the speaker (`from_fp`) knows `token` and talks to `to_fp`.
pub fn proof(token: &str, from_fp: &str, to_fp: &str) -> String {
    let key = blake3::derive_key("cachalot replication pairing v1", token.trim().as_bytes());
    let mut h = blake3::Hasher::new_keyed(&key);
    h.update(from_fp.as_bytes());
    h.update(b"\0");
    h.update(to_fp.as_bytes());
    h.finalize().to_hex().to_string()
}

/// True if `got` is the proof `proof(token, from_fp, to_fp)`.
pub fn check_proof(got: &str, token: &str, from_fp: &str, to_fp: &str) -> bool {
    match blake3::Hash::from_hex(got.trim()) {
        Ok(g) => {
            let want = blake3::Hash::from_hex(proof(token, from_fp, to_fp)).expect("hex");
            g == want
        }
        Err(_) => false,
    }
}

/// A fresh token: 32 hex characters from the kernel's random source.
pub fn new_token() -> Result<String, String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_token_and_both_keys_in_order() {
        let p = proof("tok", "a", "b");
        assert!(check_proof(&p, "tok", "a", "b"));
        assert!(!check_proof(&p, "tok", "b", "a"), "direction matters");
        assert!(!check_proof(&p, "other", "a", "b"), "token matters");
        assert!(!check_proof(&p, "tok", "a", "c"), "the peer's key matters");
        assert!(!check_proof("zz", "tok", "a", "b"));
        let t = new_token().unwrap();
        assert_eq!(t.len(), 32);
        assert_ne!(t, new_token().unwrap());
    }
}
