//! Fingerprints to tokens four at a time with AVX2, for CPUs without AVX-512 (where they have
//! it, the compiler makes eight-lane loops of the scalar ones: `tokens::wide_tokens_usable`).
//! AVX2 has neither a 64-bit product nor a leading-zero count, so both are spelled out:
//!
//! - **Products.** The lower 64 bits of `a·b` are `a₀b₀ + (a₁b₀ + a₀b₁)·2^32` from the
//!   32-bit halves, three `vpmuludq`; the upper 64 bits, four (`mul_high`, as
//!   `hashing::mul_high` takes them).
//! - **Levels.** A token's level counts the leading zeros of the `c = 62 − p` bits after its
//!   index (levels.rs, "Items as tokens"). For `c ≤ 52` (`p ≥ 10`) those bits, OR-ed into
//!   the bits of the double 2^52 with 2^52 then subtracted, are exactly their value as a
//!   double, whose exponent field is `1022 +` their bit length (0 for none): the zeros are
//!   `c` less that length. Smaller precisions keep the scalar loops.
//!
//! Every result is the scalar loop's, lane for lane (tests below, on every precision).

use super::levels::SUB_LEVELS;
use crate::core::hashing::FirstOfReduced;
use std::arch::x86_64::*;

/// The smallest precision whose bits after the index fit a double's mantissa (`62 − p ≤ 52`).
const MIN_LANE_PRECISION: u32 = 10;
/// The bits of the double 2^52.
const TWO_TO_52: i64 = 0x4330_0000_0000_0000;

/// Whether the loops here apply at precision `p` on this CPU.
pub fn usable(p: u32) -> bool {
    p >= MIN_LANE_PRECISION && std::is_x86_feature_detected!("avx2")
}

/// A constant's 64 bits in each lane, and its upper 32 bits (for `vpmuludq`, which reads the
/// lower 32 bits of each lane).
#[derive(Clone, Copy)]
struct Factor {
    whole: __m256i,
    upper: __m256i,
}

impl Factor {
    #[target_feature(enable = "avx2")]
    fn new(b: u64) -> Self {
        Factor {
            whole: _mm256_set1_epi64x(b as i64),
            upper: _mm256_set1_epi64x((b >> 32) as i64),
        }
    }
}

/// The lower 64 bits of each lane's `a·b`.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_low(a: __m256i, b: Factor) -> __m256i {
    let low = _mm256_mul_epu32(a, b.whole);
    let cross = _mm256_add_epi64(
        _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), b.whole),
        _mm256_mul_epu32(a, b.upper),
    );
    _mm256_add_epi64(low, _mm256_slli_epi64::<32>(cross))
}

/// The upper 64 bits of each lane's `a·b`.
#[inline]
#[target_feature(enable = "avx2")]
fn mul_high(a: __m256i, b: Factor) -> __m256i {
    let low32 = _mm256_set1_epi64x(0xffff_ffff);
    let a1 = _mm256_srli_epi64::<32>(a);
    let p00 = _mm256_mul_epu32(a, b.whole);
    let p01 = _mm256_mul_epu32(a, b.upper);
    let p10 = _mm256_mul_epu32(a1, b.whole);
    let p11 = _mm256_mul_epu32(a1, b.upper);
    // The middle column's carry: at most three 32-bit values.
    let middle = _mm256_add_epi64(
        _mm256_srli_epi64::<32>(p00),
        _mm256_add_epi64(_mm256_and_si256(p01, low32), _mm256_and_si256(p10, low32)),
    );
    let high = _mm256_add_epi64(_mm256_srli_epi64::<32>(p01), _mm256_srli_epi64::<32>(p10));
    _mm256_add_epi64(_mm256_add_epi64(p11, high), _mm256_srli_epi64::<32>(middle))
}

/// `x ^ (x >> S)` in each lane.
#[inline]
#[target_feature(enable = "avx2")]
fn xor_shift<const S: i32>(x: __m256i) -> __m256i {
    _mm256_xor_si256(x, _mm256_srli_epi64::<S>(x))
}

/// `a ≥ b` in each lane, unsigned: all ones or zero.
#[inline]
#[target_feature(enable = "avx2")]
fn at_least(a: __m256i, b: __m256i) -> __m256i {
    let sign = _mm256_set1_epi64x(i64::MIN);
    let below = _mm256_cmpgt_epi64(_mm256_xor_si256(b, sign), _mm256_xor_si256(a, sign));
    _mm256_xor_si256(below, _mm256_set1_epi64x(-1))
}

/// `tokens::token_value` of each lane's hash at precision `p` (at least `MIN_LANE_PRECISION`).
#[derive(Clone, Copy)]
struct Tokens {
    /// The shift right by `64 − p` that takes a hash's index, shifted left by 2, to bit 0.
    from_top: __m128i,
    /// The `c = 62 − p` bits after the index.
    rest: __m256i,
    two_to_52: __m256i,
    /// The exponent field of 2^0, less one: the bit length of `x ≥ 1` is the field less this.
    below_one: __m256i,
    /// `SUB_LEVELS·(c + 1022) + 1`, from which a level is `SUB_LEVELS` times the field taken.
    level_base: __m256i,
}

impl Tokens {
    #[target_feature(enable = "avx2")]
    fn new(p: u32) -> Self {
        debug_assert!(p >= MIN_LANE_PRECISION);
        let c = 62 - i64::from(p);
        Tokens {
            from_top: _mm_cvtsi64_si128(64 - i64::from(p)),
            rest: _mm256_set1_epi64x((1 << c) - 1),
            two_to_52: _mm256_set1_epi64x(TWO_TO_52),
            below_one: _mm256_set1_epi64x(1022),
            level_base: _mm256_set1_epi64x(SUB_LEVELS as i64 * (c + 1022) + 1),
        }
    }

    /// Each lane's token value: `index·256 + 4·j + s + 1`.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn of(&self, h: __m256i) -> __m256i {
        let s = _mm256_srli_epi64::<62>(h);
        let index = _mm256_srl_epi64(_mm256_slli_epi64::<2>(h), self.from_top);
        let rest = _mm256_and_si256(h, self.rest);
        let as_double = _mm256_sub_pd(
            _mm256_castsi256_pd(_mm256_or_si256(rest, self.two_to_52)),
            _mm256_castsi256_pd(self.two_to_52),
        );
        // 0 for `rest = 0`, else `1022 +` its bit length; below 2^11, so 32-bit lanes compare.
        let field = _mm256_srli_epi64::<52>(_mm256_castpd_si256(as_double));
        let field = _mm256_max_epu32(field, self.below_one);
        // `SUB_LEVELS = 4`: the level's `4·j` is the field's times four, subtracted.
        const { assert!(SUB_LEVELS == 4) };
        let level = _mm256_add_epi64(
            _mm256_sub_epi64(self.level_base, _mm256_slli_epi64::<2>(field)),
            s,
        );
        _mm256_or_si256(_mm256_slli_epi64::<8>(index), level)
    }
}

/// Appends the lower 32 bits of the lanes of `a` then `b` to `out` (room for 8 reserved).
#[inline]
#[target_feature(enable = "avx2")]
fn push_lower_halves(a: __m256i, b: __m256i, out: &mut Vec<u32>) {
    // a0 a1 b0 b1 | a2 a3 b2 b3, then in order.
    let packed = _mm256_castps_si256(_mm256_shuffle_ps::<0b10_00_10_00>(
        _mm256_castsi256_ps(a),
        _mm256_castsi256_ps(b),
    ));
    let packed = _mm256_permute4x64_epi64::<0b11_01_10_00>(packed);
    let len = out.len();
    debug_assert!(out.capacity() - len >= 8);
    // SAFETY: room for 8 more is reserved; they are written before the length takes them.
    unsafe {
        _mm256_storeu_si256(out.as_mut_ptr().add(len).cast(), packed);
        out.set_len(len + 8);
    }
}

/// Runs `token` over `values` 8 at a time, the tokens appended to `out`; the last few (fewer
/// than 8) to `rest`.
#[inline]
#[target_feature(enable = "avx2")]
fn eight_at_a_time(
    values: &[u64],
    out: &mut Vec<u32>,
    mut token: impl FnMut(__m256i) -> __m256i,
    rest: impl FnOnce(&[u64], &mut Vec<u32>),
) {
    out.reserve(values.len());
    let mut eights = values.chunks_exact(8);
    for eight in &mut eights {
        // SAFETY: the 8 values are in bounds; unaligned loads.
        let (a, b) = unsafe {
            (
                _mm256_loadu_si256(eight.as_ptr().cast()),
                _mm256_loadu_si256(eight.as_ptr().add(4).cast()),
            )
        };
        push_lower_halves(token(a), token(b), out);
    }
    rest(eights.remainder(), out);
}

/// The splitmix64 finalizer of `union::spread`, in each lane.
#[inline]
#[target_feature(enable = "avx2")]
fn spread(f: __m256i, first: Factor, second: Factor) -> __m256i {
    let f = mul_low(xor_shift::<30>(f), first);
    let f = mul_low(xor_shift::<27>(f), second);
    xor_shift::<31>(f)
}

/// Appends the tokens at precision `p` (see `usable`) of `fingerprints` taken as the hashes
/// `spread(f)`, as `union::spread_tokens` does, the last few by `scalar`.
#[target_feature(enable = "avx2")]
pub fn spread_tokens(
    fingerprints: &[u64],
    tokens: &mut Vec<u32>,
    p: u32,
    multipliers: [u64; 2],
    scalar: impl FnOnce(&[u64], &mut Vec<u32>),
) {
    let (first, second) = (Factor::new(multipliers[0]), Factor::new(multipliers[1]));
    let of = Tokens::new(p);
    let token = |f| of.of(spread(f, first, second));
    eight_at_a_time(fingerprints, tokens, token, scalar);
}

/// `FirstOfReduced::of_in_halves` in each lane (where `halves_apply()`).
#[derive(Clone, Copy)]
struct FirstLanes {
    m: __m256i,
    times_m: Factor,
    upper: Factor,
    lower: Factor,
}

impl FirstLanes {
    #[target_feature(enable = "avx2")]
    fn new(first: &FirstOfReduced) -> Self {
        debug_assert!(first.halves_apply());
        let (m, upper, lower) = first.parts();
        FirstLanes {
            m: _mm256_set1_epi64x(m as i64),
            times_m: Factor::new(m),
            upper: Factor::new(upper),
            lower: Factor::new(lower),
        }
    }

    /// The floor from `M`'s halves, then the ceiling from the remainder (`ceiling`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn of(&self, r: __m256i) -> __m256i {
        let (zero, one) = (_mm256_setzero_si256(), _mm256_set1_epi64x(1));
        let floor = _mm256_add_epi64(mul_low(r, self.upper), mul_high(r, self.lower));
        let rest = _mm256_sub_epi64(zero, mul_low(floor, self.times_m));
        let over = at_least(rest, self.m);
        let rest = _mm256_sub_epi64(rest, _mm256_and_si256(over, self.m));
        let inexact = _mm256_andnot_si256(_mm256_cmpeq_epi64(rest, zero), one);
        // `over` is all ones (−1) where it holds.
        _mm256_add_epi64(_mm256_sub_epi64(floor, over), inexact)
    }
}

/// Appends the tokens at precision `p` (see `usable`) of the first hashes of `fingerprints`
/// (`first.of_in_halves`, where `first.halves_apply()`), as `Counter::append_tokens` does,
/// the last few by `scalar`.
#[target_feature(enable = "avx2")]
pub fn first_tokens(
    fingerprints: &[u64],
    first: &FirstOfReduced,
    p: u32,
    tokens: &mut Vec<u32>,
    scalar: impl FnOnce(&[u64], &mut Vec<u32>),
) {
    let (first, of) = (FirstLanes::new(first), Tokens::new(p));
    eight_at_a_time(fingerprints, tokens, |r| of.of(first.of(r)), scalar);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::levels::MAX_PRECISION;
    use crate::lc::tokens::token_value;

    /// Values whose level bits are all zero, one, or end anywhere, and random ones.
    fn hashes() -> Vec<u64> {
        let mut x = 11u64;
        let mut values: Vec<u64> = (0..4_000)
            .map(|i| {
                crate::core::test_rng::step(&mut x);
                x >> (i % 64)
            })
            .collect();
        for bit in 0..64 {
            values.extend([1u64 << bit, (1u64 << bit).wrapping_sub(1), !(1u64 << bit)]);
        }
        values.extend([0, u64::MAX, 3]);
        values
    }

    #[test]
    fn lane_products_are_the_wide_ones() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let values = hashes();
        for &b in &[
            0u64,
            1,
            0xffff_ffff,
            1 << 32,
            u64::MAX,
            0x94d0_49bb_1331_11eb,
        ] {
            for four in values.chunks_exact(4) {
                let (mut low, mut high) = ([0u64; 4], [0u64; 4]);
                // SAFETY: the CPU has AVX2 (checked above); four values in bounds.
                unsafe {
                    let a = _mm256_loadu_si256(four.as_ptr().cast());
                    let factor = Factor::new(b);
                    _mm256_storeu_si256(low.as_mut_ptr().cast(), mul_low(a, factor));
                    _mm256_storeu_si256(high.as_mut_ptr().cast(), mul_high(a, factor));
                }
                for (i, &a) in four.iter().enumerate() {
                    let wide = u128::from(a) * u128::from(b);
                    assert_eq!(low[i], wide as u64, "{a} · {b}");
                    assert_eq!(high[i], (wide >> 64) as u64, "{a} · {b}");
                }
            }
        }
    }

    /// Where the remainder is 0, 1 or m − 1, at small and large `m` (to 2^63) and powers of
    /// two, as `hashing`'s test of `of_in_halves` takes them.
    #[test]
    fn lane_first_hashes_are_of_in_halves_at_the_edges() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let ms = [
            1,
            2,
            3,
            7,
            1 << 20,
            (1 << 35) + 1,
            35_514_567_036,
            (1 << 62) + 1,
            (1 << 63) - 1,
            1 << 63,
        ];
        for m in ms {
            let first = FirstOfReduced::new(m);
            let step = m >> m.trailing_zeros();
            let twice = (u128::from(step) * 2 % u128::from(m)) as u64;
            let rs: Vec<u64> = [0, 1, m / 2, m - 1, step, twice, m - step]
                .into_iter()
                .flat_map(|r| [r.saturating_sub(1), r, r.saturating_add(1)])
                .chain(hashes().into_iter().map(|h| h % m))
                .filter(|&r| r < m)
                .collect();
            for four in rs.chunks_exact(4) {
                let mut got = [0u64; 4];
                // SAFETY: the CPU has AVX2 (checked above); four values in bounds.
                unsafe {
                    let lanes = FirstLanes::new(&first);
                    let r = _mm256_loadu_si256(four.as_ptr().cast());
                    _mm256_storeu_si256(got.as_mut_ptr().cast(), lanes.of(r));
                }
                for (i, &r) in four.iter().enumerate() {
                    assert_eq!(got[i], first.of(r), "m {m} r {r}");
                }
            }
        }
    }

    #[test]
    fn lane_tokens_are_token_values_at_every_lane_precision() {
        if !std::is_x86_feature_detected!("avx2") {
            return;
        }
        let values = hashes();
        for p in MIN_LANE_PRECISION..=MAX_PRECISION {
            let want: Vec<u32> = values.iter().map(|&h| token_value(h, p) as u32).collect();
            let mut got = Vec::new();
            // SAFETY: the CPU has AVX2 (checked above).
            unsafe {
                let of = Tokens::new(p);
                eight_at_a_time(
                    &values,
                    &mut got,
                    |h| of.of(h),
                    |rest, out| out.extend(rest.iter().map(|&h| token_value(h, p) as u32)),
                );
            }
            assert_eq!(got, want, "p {p}");
        }
    }
}
