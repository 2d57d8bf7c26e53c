//! RAID-Z parity: P (XOR) and Q (Reed-Solomon over GF(2^8)) across the columns
//! of one stripe, and the reconstruction of up to two lost columns.
//!
//! The field is GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d) and
//! generator g = 2, as in RAID-6 and ZFS. For data columns D_0..D_{n-1}:
//!   P = D_0 ^ D_1 ^ ... ^ D_{n-1}
//!   Q = g^0·D_0 ^ g^1·D_1 ^ ... ^ g^{n-1}·D_{n-1}
//!
//! Invariants:
//! - Columns are ordered parity first (P, then Q), then data; parity columns are
//!   as long as the longest data column, and a shorter data column counts as
//!   zero-padded to that length (the last row of a stripe may be partial).
//! - `reconstruct` rebuilds exactly the columns it is told are lost, from the
//!   others, and never changes a column it was not told about; with more lost
//!   columns than parity columns it refuses.

/// Reduction polynomial of the field (without the x^8 term).
const POLY: u16 = 0x11d;

/// exp[i] = g^i for i in 0..510 (doubled so exp[log a + log b] needs no modulo);
/// log[a] for a != 0.
struct Tables {
    exp: [u8; 512],
    log: [u8; 256],
}

const fn build_tables() -> Tables {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    exp[510] = exp[0];
    exp[511] = exp[1];
    Tables { exp, log }
}

static TABLES: Tables = build_tables();

/// a·b in GF(2^8).
pub fn gf_mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        return 0;
    }
    TABLES.exp[TABLES.log[a as usize] as usize + TABLES.log[b as usize] as usize]
}

/// 1/a in GF(2^8); a must not be 0.
pub fn gf_inv(a: u8) -> u8 {
    assert!(a != 0, "0 has no inverse");
    TABLES.exp[255 - TABLES.log[a as usize] as usize]
}

/// g^i.
pub fn gf_pow2(i: usize) -> u8 {
    TABLES.exp[i % 255]
}

/// Multiply every byte of `x` by 2, eight bytes at a time.
fn mul2_in_place(x: &mut [u8]) {
    let mut chunks = x.chunks_exact_mut(8);
    for c in &mut chunks {
        let v = u64::from_ne_bytes((&*c).try_into().unwrap());
        let hi = v & 0x8080_8080_8080_8080;
        let r = ((v & 0x7f7f_7f7f_7f7f_7f7f) << 1) ^ ((hi >> 7) * 0x1d);
        c.copy_from_slice(&r.to_ne_bytes());
    }
    for b in chunks.into_remainder() {
        *b = gf_mul(*b, 2);
    }
}

/// dst ^= src (src may be shorter: the rest of dst is unchanged).
fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = src.len().min(dst.len());
    let (d8, dr) = dst[..n].split_at_mut(n / 8 * 8);
    let (s8, sr) = src[..n].split_at(n / 8 * 8);
    for (d, s) in d8.chunks_exact_mut(8).zip(s8.chunks_exact(8)) {
        let v = u64::from_ne_bytes((&*d).try_into().unwrap())
            ^ u64::from_ne_bytes(s.try_into().unwrap());
        d.copy_from_slice(&v.to_ne_bytes());
    }
    for (d, s) in dr.iter_mut().zip(sr) {
        *d ^= s;
    }
}

/// Column `x` (`len` bytes) of a stripe that lost only it, from the other
/// columns `cols` (`cols[x]` is ignored), when XOR suffices: any column but Q,
/// which is the XOR of P (or, for P, of nothing more) and every data column
/// but `x`. None for Q. Unlike `reconstruct` it borrows the columns: one pass,
/// no copies of the survivors (what a resilver does for nearly every block).
pub fn rebuild_one_by_xor(cols: &[&[u8]], nparity: usize, x: usize, len: usize) -> Option<Vec<u8>> {
    if nparity == 2 && x == 1 {
        return None;
    }
    let mut srcs = cols
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != x && !(nparity == 2 && i == 1))
        .map(|(_, c)| *c);
    let first = srcs.next().unwrap_or_default();
    let mut out = first[..first.len().min(len)].to_vec();
    out.resize(len, 0);
    for s in srcs {
        xor_into(&mut out, s);
    }
    Some(out)
}

/// dst = c·dst, bytewise, through a 256-entry table for the constant.
fn scale_in_place(dst: &mut [u8], c: u8) {
    let mut table = [0u8; 256];
    for (i, t) in table.iter_mut().enumerate() {
        *t = gf_mul(i as u8, c);
    }
    for b in dst {
        *b = table[*b as usize];
    }
}

/// P (and Q when `nparity` is 2) of `data`, each `len` bytes long.
pub fn compute_parity(data: &[&[u8]], nparity: usize, len: usize) -> Vec<Vec<u8>> {
    assert!(
        (1..=2).contains(&nparity),
        "raidz{nparity} is not supported"
    );
    let mut p = vec![0u8; len];
    for d in data {
        xor_into(&mut p, d);
    }
    if nparity == 1 {
        return vec![p];
    }
    // Horner: Q = (((D_{n-1})·g ^ D_{n-2})·g ^ ...)·g ^ D_0.
    let mut q = vec![0u8; len];
    for d in data.iter().rev() {
        mul2_in_place(&mut q);
        xor_into(&mut q, d);
    }
    vec![p, q]
}

/// Why reconstruction was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum ParityError {
    TooManyLost { lost: usize, nparity: usize },
}

/// Rebuild the columns listed in `lost` (indices into `cols`: parity first, then
/// data) from the others. Lost columns keep their length; their bytes are replaced.
pub fn reconstruct(
    cols: &mut [Vec<u8>],
    nparity: usize,
    lost: &[usize],
) -> Result<(), ParityError> {
    assert!(
        (1..=2).contains(&nparity),
        "raidz{nparity} is not supported"
    );
    let mut lost: Vec<usize> = lost.to_vec();
    lost.sort_unstable();
    lost.dedup();
    if lost.len() > nparity {
        return Err(ParityError::TooManyLost {
            lost: lost.len(),
            nparity,
        });
    }
    let len = cols[0].len();
    let lost_data: Vec<usize> = lost.iter().filter(|&&c| c >= nparity).copied().collect();
    let p_lost = lost.contains(&0);
    match lost_data.as_slice() {
        [] => {}
        [x] if !p_lost => rebuild_one_from_p(cols, nparity, *x, len),
        [x] => rebuild_one_from_q(cols, *x, len),
        [x, y] => rebuild_two(cols, *x, *y, len),
        _ => unreachable!("at most two lost columns"),
    }
    // With the data whole again, lost parity is simply recomputed.
    if lost.iter().any(|&c| c < nparity) {
        let data: Vec<&[u8]> = cols[nparity..].iter().map(|c| c.as_slice()).collect();
        let parity = compute_parity(&data, nparity, len);
        for (i, p) in parity.into_iter().enumerate() {
            if lost.contains(&i) {
                cols[i] = p;
            }
        }
    }
    Ok(())
}

/// Data column `x` = P ^ every other data column.
fn rebuild_one_from_p(cols: &mut [Vec<u8>], nparity: usize, x: usize, len: usize) {
    let mut acc = cols[0][..len].to_vec();
    for (i, c) in cols.iter().enumerate().skip(nparity) {
        if i != x {
            xor_into(&mut acc, c);
        }
    }
    let n = cols[x].len();
    cols[x].copy_from_slice(&acc[..n]);
}

/// Data column `x` (index among all columns; data index x-2) from Q:
/// D_x = (Q ^ Σ_{i≠x} g^i·D_i) · g^-x.
fn rebuild_one_from_q(cols: &mut [Vec<u8>], x: usize, len: usize) {
    let nparity = 2;
    let acc = q_without(cols, &[x], len);
    let mut d = acc;
    scale_in_place(&mut d, gf_inv(gf_pow2(x - nparity)));
    let n = cols[x].len();
    cols[x].copy_from_slice(&d[..n]);
}

/// Q ^ Σ g^i·D_i over the data columns not in `skip` (so what is left is the
/// contribution of the skipped columns).
fn q_without(cols: &[Vec<u8>], skip: &[usize], len: usize) -> Vec<u8> {
    let nparity = 2;
    let mut acc = vec![0u8; len];
    for (i, c) in cols.iter().enumerate().skip(nparity).rev() {
        mul2_in_place(&mut acc);
        if !skip.contains(&i) {
            xor_into(&mut acc, c);
        }
    }
    xor_into(&mut acc, &cols[1]);
    acc
}

/// Two lost data columns x < y (raidz2, P and Q intact):
///   Pxy = D_x ^ D_y,  Qxy = g^a·D_x ^ g^b·D_y  (a, b: data indices)
///   D_x = (Qxy ^ g^b·Pxy) / (g^a ^ g^b),  D_y = Pxy ^ D_x.
fn rebuild_two(cols: &mut [Vec<u8>], x: usize, y: usize, len: usize) {
    let nparity = 2;
    let mut pxy = cols[0][..len].to_vec();
    for (i, c) in cols.iter().enumerate().skip(nparity) {
        if i != x && i != y {
            xor_into(&mut pxy, c);
        }
    }
    let qxy = q_without(cols, &[x, y], len);
    let ga = gf_pow2(x - nparity);
    let gb = gf_pow2(y - nparity);
    let mut dx = pxy.clone();
    scale_in_place(&mut dx, gb);
    xor_into(&mut dx, &qxy);
    scale_in_place(&mut dx, gf_inv(ga ^ gb));
    let mut dy = pxy;
    xor_into(&mut dy, &dx);
    let nx = cols[x].len();
    cols[x].copy_from_slice(&dx[..nx]);
    let ny = cols[y].len();
    cols[y].copy_from_slice(&dy[..ny]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small deterministic generator (xorshift): no dependency needed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn bytes(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    #[test]
    fn field_axioms_hold() {
        for a in 1..=255u8 {
            assert_eq!(gf_mul(a, gf_inv(a)), 1, "inverse of {a}");
            assert_eq!(gf_mul(a, 1), a);
        }
        // mul2 (SWAR) agrees with the table multiply.
        let mut v: Vec<u8> = (0..=255).collect();
        mul2_in_place(&mut v);
        for (i, b) in v.iter().enumerate() {
            assert_eq!(*b, gf_mul(i as u8, 2));
        }
        // g generates the whole multiplicative group.
        let mut seen = std::collections::HashSet::new();
        for i in 0..255 {
            seen.insert(gf_pow2(i));
        }
        assert_eq!(seen.len(), 255);
    }

    /// A stripe: parity then data columns, data columns of `full` bytes except
    /// the last `short` ones, which are one sector shorter (a partial last row).
    fn stripe(
        rng: &mut Rng,
        ndata: usize,
        nparity: usize,
        full: usize,
        short: usize,
    ) -> Vec<Vec<u8>> {
        let sector = 16;
        let data: Vec<Vec<u8>> = (0..ndata)
            .map(|i| {
                let n = if i >= ndata - short {
                    full - sector
                } else {
                    full
                };
                rng.bytes(n)
            })
            .collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let mut cols = compute_parity(&refs, nparity, full);
        cols.extend(data);
        cols
    }

    /// Every width, every choice of up to `nparity` lost (zeroed) or corrupted
    /// (noise) columns: reconstruction returns the original stripe.
    fn every_loss(nparity: usize) {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 + nparity as u64);
        for ndata in 1..=14 {
            for short in [0, ndata / 2, ndata - 1] {
                let orig = stripe(&mut rng, ndata, nparity, 48, short);
                let n = orig.len();
                let mut sets: Vec<Vec<usize>> = (0..n).map(|a| vec![a]).collect();
                if nparity == 2 {
                    for a in 0..n {
                        for b in a + 1..n {
                            sets.push(vec![a, b]);
                        }
                    }
                }
                for x in 0..n {
                    let others: Vec<&[u8]> = (0..n)
                        .map(|i| if i == x { &[][..] } else { orig[i].as_slice() })
                        .collect();
                    let got = rebuild_one_by_xor(&others, nparity, x, orig[x].len());
                    if nparity == 2 && x == 1 {
                        assert_eq!(got, None, "Q needs the field arithmetic");
                    } else {
                        assert_eq!(got.as_ref(), Some(&orig[x]), "xor: {ndata} data, lost {x}");
                    }
                }
                for lost in sets {
                    for noise in [false, true] {
                        let mut cols = orig.clone();
                        for &c in &lost {
                            let l = cols[c].len();
                            cols[c] = if noise { rng.bytes(l) } else { vec![0; l] };
                        }
                        reconstruct(&mut cols, nparity, &lost).unwrap();
                        assert_eq!(cols, orig, "raidz{nparity} {ndata} data, lost {lost:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn raidz1_rebuilds_any_one_column() {
        every_loss(1);
    }

    #[test]
    fn raidz2_rebuilds_any_two_columns() {
        every_loss(2);
    }

    #[test]
    fn more_lost_than_parity_is_refused() {
        let mut rng = Rng(7);
        let mut cols = stripe(&mut rng, 4, 1, 32, 0);
        let before = cols.clone();
        assert_eq!(
            reconstruct(&mut cols, 1, &[1, 2]),
            Err(ParityError::TooManyLost {
                lost: 2,
                nparity: 1
            })
        );
        assert_eq!(cols, before);
    }

    #[test]
    fn q_matches_an_independent_oracle() {
        // Q computed by the definition, byte by byte, against the Horner/SWAR path.
        let mut rng = Rng(11);
        let data: Vec<Vec<u8>> = (0..9).map(|_| rng.bytes(37)).collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let pq = compute_parity(&refs, 2, 37);
        for j in 0..37 {
            let q = data
                .iter()
                .enumerate()
                .fold(0u8, |acc, (i, d)| acc ^ gf_mul(gf_pow2(i), d[j]));
            assert_eq!(pq[1][j], q);
        }
    }
}
