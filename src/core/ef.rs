//! Elias–Fano coding of a sorted set of distinct integers below a universe `U`, inside a bit
//! range of a `u64` word slice (pure), shared by both types: linear counters keep their exact
//! fingerprints and their sparse bit positions this way (`lc/counter.rs`), and small Bloom
//! sub-filters their fingerprints (`bloom/sparse.rs`), in memory and on disk alike.
//!
//! # Layout
//!
//! `k` values `v_0 < v_1 < … < v_{k−1} < U`, `l = ⌊log2(U/k)⌋` (0 when `U < 2k`), `B =
//! ⌊(U−1)/2^l⌋ + 1` buckets. From the stream's first bit on, bit `i` of a word being `1 << i`:
//!
//! ```text
//! lower  k·l bits   the low l bits of v_i at bit i·l
//! upper  k + B bits bucket b (= v >> l) as one 1 per value in it then a 0; v_i's 1 is at
//!                   bit (v_i >> l) + i
//! ```
//!
//! so the stream takes `k·(l + 1) + B` bits (none when `k = 0`), `log2(U/k) + 2` bits per value give or take half a
//! bit, within 0.6 bit of the information-theoretic floor `log2 C(U, k)/k`. `l` and `B` are
//! functions of `k` and `U`, so equal sets have equal streams.
//!
//! # Cost
//!
//! Finding a value selects the start of its bucket in the upper bits (a popcount scan over
//! `(k + B)/64` words) and then compares the lower bits of the bucket's few values; inserting
//! one shifts the bits after it (two word-wise passes). Both are linear in the stream's size,
//! which the counter bounds (`lc::geometry::SPARSE_MAX_BYTES`, `lc::geometry::EXACT_MAX`). When an
//! insert changes `l`, the caller rebuilds the stream ([`write()`]). The module is built for the
//! baseline x86-64; the scan and the shift run as copies compiled for POPCNT and AVX2 where the
//! CPU has them (chosen at run time), and a caller about to touch most of a stream out of the
//! caches asks for all its lines first (`Block::prefetch`).

/// The size parameters of a stream of `k` values below `universe`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub k: u64,
    /// Low bits per value.
    pub l: u32,
    /// Buckets, `⌊(U−1)/2^l⌋ + 1`.
    pub buckets: u64,
}

impl Shape {
    /// The shape of `k` distinct values below `universe` (`k ≤ universe`, `universe ≥ 1`). An
    /// empty stream takes no bits.
    pub fn new(k: u64, universe: u64) -> Shape {
        if k == 0 {
            return Shape {
                k,
                l: 0,
                buckets: 0,
            };
        }
        // l = ⌊log2 ⌊U/k⌋⌋ (0 below 2): the largest j with k·2^j ≤ U, found from the two
        // lengths without a division, which every add to a list computes a few times.
        let j = k.leading_zeros().saturating_sub(universe.leading_zeros());
        let l = if j > 0 && k << j > universe { j - 1 } else { j };
        Shape {
            k,
            l,
            buckets: ((universe - 1) >> l) + 1,
        }
    }

    /// Bits the stream takes.
    pub fn bits(&self) -> u64 {
        self.k * (self.l as u64 + 1) + self.buckets
    }

    /// Where the upper bits start, from the stream's start.
    pub(crate) fn upper(&self) -> u64 {
        self.k * self.l as u64
    }
}

/// `width` (≤ 64) bits at bit `at`.
#[inline]
pub fn read_bits(words: &[u64], at: u64, width: u32) -> u64 {
    if width == 0 {
        return 0;
    }
    let (i, s) = ((at / 64) as usize, (at % 64) as u32);
    let mut v = words[i] >> s;
    if s + width > 64 {
        v |= words[i + 1] << (64 - s);
    }
    if width < 64 {
        v &= (1u64 << width) - 1;
    }
    v
}

/// Overwrites `width` (≤ 64) bits at bit `at` with `value` (which fits in them).
#[inline]
pub fn write_bits(words: &mut [u64], at: u64, width: u32, value: u64) {
    if width == 0 {
        return;
    }
    let (i, s) = ((at / 64) as usize, (at % 64) as u32);
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    words[i] = (words[i] & !(mask << s)) | (value << s);
    if s + width > 64 {
        let spill = 64 - s;
        words[i + 1] = (words[i + 1] & !(mask >> spill)) | (value >> spill);
    }
}

/// Moves bits `[at, end)` to `[at + width, end + width)` (`0 < width < 64`), leaving bits
/// `[at, at + width)` for the caller to write; bits below `at` and from `end + width` on stay.
///
/// Compiled for AVX2 where the CPU has it (four words a vector, against two in the baseline
/// x86-64 build) and for AVX-512 F (eight) where the CPU also has VBMI2: those (Intel since
/// Ice Lake, AMD since Zen 4) run 512-bit shifts at full clock, where the first AVX-512 Xeons
/// slow the core for a while after them. An insert into a list spends most of its
/// instructions here.
fn shift_up(words: &mut [u64], at: u64, width: u32, end: u64) {
    #[cfg(target_arch = "x86_64")]
    if vbmi2_usable() {
        // SAFETY: the CPU has AVX-512 F.
        return unsafe { shift_up_with_avx512(words, at, width, end) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { shift_up_with_avx2(words, at, width, end) };
    }
    shift_up_in(words, at, width, end)
}

/// Whether this CPU has AVX-512 VBMI2 and what it builds on (F, BW): Intel since Ice Lake,
/// AMD since Zen 4, which also run 512-bit instructions at full clock.
#[cfg(target_arch = "x86_64")]
pub fn vbmi2_usable() -> bool {
    std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("avx512vbmi2")
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn shift_up_with_avx2(words: &mut [u64], at: u64, width: u32, end: u64) {
    shift_up_in(words, at, width, end)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn shift_up_with_avx512(words: &mut [u64], at: u64, width: u32, end: u64) {
    shift_up_by::<16, 17>(words, at, width, end)
}

#[inline(always)]
fn shift_up_in(words: &mut [u64], at: u64, width: u32, end: u64) {
    shift_up_by::<8, 9>(words, at, width, end)
}

/// `shift_up_in` in groups of `N` words (`M` = N + 1): as many as the build's vectors take in
/// two steps.
#[inline(always)]
fn shift_up_by<const N: usize, const M: usize>(words: &mut [u64], at: u64, width: u32, end: u64) {
    debug_assert!(width > 0 && width < 64 && at <= end);
    if at == end {
        return;
    }
    let first = (at / 64) as usize;
    let last = ((end + width as u64 - 1) / 64) as usize;
    let above = match (end + width as u64) % 64 {
        0 => 0,
        top => u64::MAX << top,
    };
    let span = &mut words[first..=last];
    let kept = span[span.len() - 1] & above;
    // Highest word first, each taking the top bits of the one below (exclusive ranges: an
    // inclusive one costs a check per word). `N` words at a time, then four, each group
    // from the words below it, all read before any is written, so that the compiler can do
    // them as vectors: inserts into token lists spend most of their time here.
    let mut j = shift_groups::<N, M>(span, span.len() - 1, width);
    j = shift_groups::<4, 5>(span, j, width);
    for j in (1..=j).rev() {
        span[j] = (span[j] << width) | (span[j - 1] >> (64 - width));
    }
    let below = (1u64 << (at % 64)) - 1;
    span[0] = (span[0] & below) | ((span[0] << width) & !below);
    let top = span.len() - 1;
    span[top] = (span[top] & !above) | kept;
}

/// `shift_up_in`'s step over whole groups of `N` words (`M` = N + 1, the words a group reads),
/// from word `j` down while a group fits above word 0; returns the word it stopped at.
#[inline(always)]
fn shift_groups<const N: usize, const M: usize>(
    span: &mut [u64],
    mut j: usize,
    width: u32,
) -> usize {
    while j >= N {
        let below: [u64; M] = span[j - N..=j].try_into().expect("N + 1 words");
        for (t, word) in span[j + 1 - N..=j].iter_mut().enumerate() {
            *word = (below[t + 1] << width) | (below[t] >> (64 - width));
        }
        j -= N;
    }
    j
}

/// `SELECT_IN_BYTE[k][b]`: the position of the set bit of rank `k` in byte `b` (0 if none).
pub(crate) const SELECT_IN_BYTE: [[u8; 256]; 8] = {
    let mut table = [[0u8; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let (mut k, mut bit) = (0, 0);
        while bit < 8 {
            if b >> bit & 1 == 1 {
                table[k][b] = bit as u8;
                k += 1;
            }
            bit += 1;
        }
        b += 1;
    }
    table
};

/// The position of the set bit of rank `k` in `x` (which has more than k): the byte holding
/// it by halving the word by its low half's popcount, then a table.
#[inline(always)]
pub fn select_in_word(x: u64, k: u64) -> u64 {
    static SELECT: [[u8; 256]; 8] = SELECT_IN_BYTE;
    let (mut x, mut k, mut at) = (x, k, 0u64);
    for half in [32u32, 16, 8] {
        let low = (x & ((1u64 << half) - 1)).count_ones() as u64;
        if k >= low {
            k -= low;
            x >>= half;
            at += half as u64;
        }
    }
    at + SELECT[k as usize & 7][x as usize & 0xff] as u64
}

/// The position, from `start`, of the `t`-th (from 0) zero bit in `[start, start + len)`,
/// which holds `zeros` zero bits, or `len` if there are not that many. Scans whole words from
/// the nearer end.
#[inline(always)]
fn select_zero(words: &[u64], start: u64, len: u64, zeros: u64, t: u64) -> u64 {
    let end = start + len;
    if t >= zeros || len == 0 {
        return len;
    }
    // The zeros of word `i` within the range.
    let zeros_of = |i: usize| {
        let base = i as u64 * 64;
        let mut w = !words[i];
        if base < start {
            w &= u64::MAX << (start - base);
        }
        if end - base < 64 {
            w &= (1u64 << (end - base)) - 1;
        }
        w
    };
    let (first, last) = ((start / 64) as usize, end.div_ceil(64) as usize);
    // Words strictly inside the range need no mask: they are counted four at a time (one
    // sum of four popcounts, a branch per four words) until the group holding the zero.
    let zeros_in = |i: usize| -> u64 {
        words[i..i + 4]
            .iter()
            .map(|w| u64::from(w.count_zeros()))
            .sum()
    };
    if t < zeros / 2 {
        let mut t = t;
        let mut i = first;
        while i < last {
            if i > first && i + 4 < last {
                let n = zeros_in(i);
                if t >= n {
                    t -= n;
                    i += 4;
                    continue;
                }
            }
            let w = zeros_of(i);
            let n = w.count_ones() as u64;
            if t < n {
                return i as u64 * 64 + select_in_word(w, t) - start;
            }
            t -= n;
            i += 1;
        }
    } else {
        let mut t = zeros - 1 - t; // counted from the end
        let mut i = last;
        while i > first {
            if i > first + 4 && i < last {
                let n = zeros_in(i - 4);
                if t >= n {
                    t -= n;
                    i -= 4;
                    continue;
                }
            }
            i -= 1;
            let w = zeros_of(i);
            let n = w.count_ones() as u64;
            if t < n {
                return i as u64 * 64 + select_in_word(w, n - 1 - t) - start;
            }
            t -= n;
        }
    }
    len
}

/// Where `x` is, or would go, in the stream starting at bit `base`.
#[derive(Debug, PartialEq, Eq)]
pub struct Probe {
    pub found: bool,
    /// Its rank: the number of values below `x`.
    pub rank: u64,
}

/// Looks `x` (below the universe) up.
///
/// The search for `x`'s bucket counts zeros a word at a time; the module is built for the
/// baseline x86-64, whose popcount is a dozen instructions, so a copy compiled for POPCNT runs
/// where the CPU has it (every x86-64 server CPU since 2008): an `LC.ADD` to an exact or
/// tokens-mode counter spends most of its lookup here.
pub fn find(words: &[u64], base: u64, shape: Shape, x: u64) -> Probe {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT.
        return unsafe { find_with_popcnt(words, base, shape, x) };
    }
    find_in(words, base, shape, x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn find_with_popcnt(words: &[u64], base: u64, shape: Shape, x: u64) -> Probe {
    find_in(words, base, shape, x)
}

#[inline(always)]
fn find_in(words: &[u64], base: u64, shape: Shape, x: u64) -> Probe {
    let hi = x >> shape.l;
    // Bucket `hi` starts after the zero closing bucket `hi − 1`.
    let start = match hi {
        0 => 0,
        _ => {
            select_zero(
                words,
                base + shape.upper(),
                shape.k + shape.buckets,
                shape.buckets,
                hi - 1,
            ) + 1
        }
    };
    find_from(words, base, shape, x, start)
}

/// Where a bucket starts in the upper bits at `upper` (relative to them) when the zero that
/// closes the bucket before it is zero number `left` (from 0) at or after upper bit `from`:
/// a count of zeros word by word, for callers that start close by (upper bits a few words
/// long, or an index sample of their own). None if the stream ends first.
#[inline(always)]
pub fn after_zero(words: &[u64], upper: u64, from: u64, mut left: u64) -> Option<u64> {
    let at = upper + from;
    let mut w = (at / 64) as usize;
    let mut zeros = !*words.get(w)? & !low_mask((at % 64) as u32);
    loop {
        let count = zeros.count_ones() as u64;
        if left < count {
            return Some(w as u64 * 64 + select_in_word(zeros, left) - upper + 1);
        }
        left -= count;
        w += 1;
        zeros = !*words.get(w)?;
    }
}

/// [`find`] when the caller knows where `x`'s bucket starts in the upper bits (`start`, from
/// an index of its own): the scan of that bucket.
#[inline(always)]
pub fn find_from(words: &[u64], base: u64, shape: Shape, x: u64, start: u64) -> Probe {
    let (l, k) = (shape.l, shape.k);
    let (hi, lo) = (x >> l, x & low_mask(l));
    let upper = base + shape.upper();
    // Ones before `start` in the upper bits: all but the `hi` zeros. Value `rank`'s one is
    // then upper bit hi + rank, inside the upper bits (k + buckets long) while rank < k,
    // since x is below the universe (hi < buckets).
    let mut rank = start.saturating_sub(hi).min(k);
    while rank < k && bit(words, upper + hi + rank) {
        let v = read_bits(words, base + rank * l as u64, l);
        if v >= lo {
            return Probe {
                found: v == lo,
                rank,
            };
        }
        rank += 1;
    }
    Probe { found: false, rank }
}

/// Inserts `x` at `rank` (from [`find`], not found) into a stream of shape `shape`, which
/// must keep its `l` with one more value (`Shape::new(k + 1, U).l == shape.l`); the words hold
/// at least `base + Shape::new(k + 1, U).bits()` bits, zero beyond the stream.
pub fn insert(words: &mut [u64], base: u64, shape: Shape, rank: u64, x: u64) {
    let l = shape.l;
    let end = base + shape.bits();
    // One pass over the tail: the upper bits after the new value's move by l + 1, the bits
    // between its lower and its upper bits by l.
    let lower = base + rank * l as u64;
    let upper = base + shape.upper() + (x >> l) + rank;
    shift_up(words, upper, l + 1, end);
    if l > 0 {
        shift_up(words, lower, l, upper);
        write_bits(words, lower, l, x & low_mask(l));
    }
    write_bits(words, upper + l as u64, 1, 1);
}

/// Removes the value `x` at `rank` (from [`find`], found) from a stream of shape `shape`,
/// which must keep its `l` with one value fewer (`Shape::new(k − 1, U).l == shape.l`): the
/// inverse of [`insert`]. The bits past the shorter stream's end are zero after it.
pub fn remove(words: &mut [u64], base: u64, shape: Shape, rank: u64, x: u64) {
    let l = shape.l;
    let end = base + shape.bits();
    // The lower bits after the value's and the upper bits before its one move down by l; the
    // upper bits after its one by l + 1.
    let lower = base + rank * l as u64;
    let one = base + shape.upper() + (x >> l) + rank;
    shift_down(words, lower + l as u64, l, one);
    shift_down(words, one + 1, l + 1, end);
    let tail = end - (l as u64 + 1);
    for at in (tail..end).step_by(64) {
        write_bits(words, at, (end - at).min(64) as u32, 0);
    }
}

/// Moves bits `from..end` down by `width` (to `from − width`), in ascending chunks: each chunk
/// lands below the bits still to be read.
fn shift_down(words: &mut [u64], from: u64, width: u32, end: u64) {
    for at in (from..end).step_by(64) {
        let len = (end - at).min(64) as u32;
        let bits = read_bits(words, at, len);
        write_bits(words, at - width as u64, len, bits);
    }
}

/// Writes the stream of `values` (sorted, distinct, below the universe, exactly `shape.k` of
/// them) at bit `base` of zeroed words.
pub fn write(words: &mut [u64], base: u64, shape: Shape, values: impl IntoIterator<Item = u64>) {
    let (l, upper) = (shape.l, base + shape.upper());
    for (i, v) in values.into_iter().enumerate() {
        let i = i as u64;
        write_bits(words, base + i * l as u64, l, v & low_mask(l));
        write_bits(words, upper + (v >> l) + i, 1, 1);
    }
}

/// The values in order.
pub fn iter(words: &[u64], base: u64, shape: Shape) -> Iter<'_> {
    Iter {
        words,
        lower: base,
        upper: base + shape.upper(),
        len: shape.k + shape.buckets,
        l: shape.l,
        left: shape.k,
        pos: 0,
        rank: 0,
        pending: 0,
    }
}

/// Low parts of `l` bits read in order from bit `at` on: `have` bits of word `next − 1` left
/// in `buffer`, low first.
pub(crate) struct Lows<'a> {
    words: &'a [u64],
    next: usize,
    buffer: u64,
    have: u32,
    l: u32,
    mask: u64,
}

impl<'a> Lows<'a> {
    #[inline(always)]
    pub(crate) fn new(words: &'a [u64], at: u64, l: u32) -> Lows<'a> {
        let mut lows = Lows {
            words,
            next: (at / 64) as usize,
            buffer: 0,
            have: 0,
            l,
            mask: low_mask(l),
        };
        if !at.is_multiple_of(64) {
            lows.buffer = words[lows.next] >> (at % 64);
            lows.have = 64 - (at % 64) as u32;
            lows.next += 1;
        }
        lows
    }

    /// The next low part.
    #[inline(always)]
    pub(crate) fn take(&mut self) -> u64 {
        let l = self.l;
        if self.have >= l {
            let lo = self.buffer & self.mask;
            self.buffer >>= l;
            self.have -= l;
            lo
        } else {
            let word = self.words[self.next];
            self.next += 1;
            let lo = (self.buffer | word << self.have) & self.mask;
            self.buffer = word >> (l - self.have);
            self.have += 64 - l;
            lo
        }
    }
}

#[derive(Clone)]
pub struct Iter<'a> {
    words: &'a [u64],
    lower: u64,
    upper: u64,
    len: u64,
    l: u32,
    left: u64,
    /// Upper bits before `pos` have been loaded; `pending` holds the ones not yet returned of
    /// the 64 before it.
    pos: u64,
    rank: u64,
    pending: u64,
}

impl Iterator for Iter<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        while self.pending == 0 {
            if self.pos >= self.len {
                return None;
            }
            let width = (self.len - self.pos).min(64) as u32;
            self.pending = read_bits(self.words, self.upper + self.pos, width);
            self.pos += 64;
        }
        let bit = self.pos - 64 + self.pending.trailing_zeros() as u64;
        self.pending &= self.pending - 1;
        let hi = bit - self.rank;
        let lo = read_bits(self.words, self.lower + self.rank * self.l as u64, self.l);
        self.rank += 1;
        self.left -= 1;
        Some((hi << self.l) | lo)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }

    /// The rest of the values in one loop per upper word (`for_each`, `sum` and the like come
    /// here): no per-value check for an empty word, lower bits read without a branch. Many-key
    /// unions decode every token of every counter through it.
    fn fold<B, F: FnMut(B, u64) -> B>(self, init: B, mut f: F) -> B {
        let Iter {
            words,
            lower,
            upper,
            len,
            l,
            mut left,
            mut pos,
            rank,
            mut pending,
        } = self;
        // `left` counts the ones not yet loaded into `pending` from here on.
        left = left.saturating_sub(u64::from(pending.count_ones()));
        if left == 0 && pending == 0 {
            return init;
        }
        let mut lows = Lows::new(words, lower + rank * l as u64, l);
        // A value's high part: its upper bit's position minus its rank, `top` plus the bit's
        // place in `pending`.
        let mut top = pos.wrapping_sub(64).wrapping_sub(rank);
        let mut acc = init;
        loop {
            // `pending` holds at most `left` ones (see below).
            while pending != 0 {
                let hi = top.wrapping_add(pending.trailing_zeros() as u64);
                acc = f(acc, hi << l | lows.take());
                pending &= pending - 1;
                top = top.wrapping_sub(1);
            }
            if left == 0 || pos >= len {
                return acc;
            }
            let width = (len - pos).min(64) as u32;
            pending = read_bits(words, upper + pos, width);
            top = top.wrapping_add(64);
            pos += 64;
            // A stream holds exactly `k` ones (`validate`); if not, the values end at `k`.
            let ones = u64::from(pending.count_ones());
            while u64::from(pending.count_ones()) > left {
                pending &= !(1 << (63 - pending.leading_zeros()));
            }
            left -= ones.min(left);
        }
    }
}

/// Checks a stream read from outside: exactly `shape.k` values, strictly increasing, all below
/// `universe`. (Bits beyond the stream are the caller's to check.)
pub fn validate(words: &[u64], base: u64, shape: Shape, universe: u64) -> Result<(), &'static str> {
    let upper = base + shape.upper();
    let len = shape.k + shape.buckets;
    let mut ones = 0u64;
    let mut at = 0;
    while at < len {
        let width = (len - at).min(64) as u32;
        ones += read_bits(words, upper + at, width).count_ones() as u64;
        at += 64;
    }
    if ones != shape.k {
        return Err("value count mismatch");
    }
    // A one in the last upper bit is a high part of `buckets`: a value of at least the
    // universe, which wraps past 2^64 (and so passes the check below) in universes above 2^63.
    if len > 0 && bit(words, upper + len - 1) {
        return Err("value out of range");
    }
    let mut last = None;
    for v in iter(words, base, shape) {
        if last.is_some_and(|last| last >= v) {
            return Err("values not strictly increasing");
        }
        last = Some(v);
    }
    if last.is_some_and(|last| last >= universe) {
        return Err("value out of range");
    }
    Ok(())
}

/// The `l` low bits set (l ≤ 64).
#[inline(always)]
pub fn low_mask(l: u32) -> u64 {
    if l == 64 {
        u64::MAX
    } else {
        (1u64 << l) - 1
    }
}

/// Bit `at` of `words`.
#[inline(always)]
pub fn bit(words: &[u64], at: u64) -> bool {
    words[(at / 64) as usize] >> (at % 64) & 1 == 1
}

/// 16-bit samples, four to a word, the first in the low bits: the indexes that sparse and
/// frozen sets keep beside their streams (positions and ranks within a few thousand bits).
pub const SAMPLES_PER_WORD: u64 = 4;

/// Sample `i` (from 0).
#[inline(always)]
pub fn sample(samples: &[u64], i: u64) -> u64 {
    samples[(i / SAMPLES_PER_WORD) as usize] >> (16 * (i % SAMPLES_PER_WORD)) & 0xffff
}

/// Sets sample `i` to `value` (< 2^16).
#[inline]
pub fn set_sample(samples: &mut [u64], i: u64, value: u64) {
    let (w, shift) = ((i / SAMPLES_PER_WORD) as usize, 16 * (i % SAMPLES_PER_WORD));
    samples[w] = samples[w] & !(0xffff << shift) | value << shift;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// `shift_up` moves `[at, end)` up by `width` and keeps every other bit, against a
        /// move bit by bit; every build's path gives the same words.
        #[test]
        fn shift_up_moves_the_range_and_keeps_the_rest(
            words in proptest::collection::vec(any::<u64>(), 2..40),
            at_in in 0u64..1 << 20,
            len_in in 0u64..1 << 20,
            width in 1u32..64,
        ) {
            let bits = words.len() as u64 * 64;
            let at = at_in % (bits - u64::from(width));
            let end = at + len_in % (bits - u64::from(width) - at + 1);
            let mut want = words.clone();
            for b in (at..end).rev() {
                let to = b + u64::from(width);
                let one = bit(&words, b);
                want[(to / 64) as usize] =
                    want[(to / 64) as usize] & !(1 << (to % 64)) | u64::from(one) << (to % 64);
            }
            // The build this CPU takes, the baseline one, and the AVX2 one where the CPU takes
            // AVX-512's.
            let mut builds = vec![words.clone(), words.clone()];
            shift_up(&mut builds[0], at, width, end);
            shift_up_in(&mut builds[1], at, width, end);
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                let mut avx2 = words.clone();
                // SAFETY: the CPU has AVX2.
                unsafe { shift_up_with_avx2(&mut avx2, at, width, end) };
                builds.push(avx2);
            }
            // Bits [at, at + width) are the caller's to write: compare the rest.
            for b in (at..at + u64::from(width)).filter(|&b| b < end + u64::from(width)) {
                for w in std::iter::once(&mut want).chain(builds.iter_mut()) {
                    w[(b / 64) as usize] &= !(1 << (b % 64));
                }
            }
            for got in &builds {
                prop_assert_eq!(got, &want);
            }
        }

        /// The shape's `l` is `⌊log2 ⌊U/k⌋⌋` (0 below 2), the division's answer.
        #[test]
        fn low_bits_are_the_log_of_the_ratio(k in 1u64.., universe in 1u64.., shift in 0u32..64) {
            // Random pairs, and universes at and around k·2^j, where the log steps.
            let small = k >> shift | 1;
            let at = small << shift.min(small.leading_zeros());
            let pairs = [(k, universe), (small, universe), (small, at), (small, at - 1), (small, at.saturating_add(1))];
            for (k, universe) in pairs {
                let ratio = universe / k;
                let want = if ratio >= 2 { 63 - ratio.leading_zeros() } else { 0 };
                prop_assert_eq!(Shape::new(k, universe).l, want, "k {} U {}", k, universe);
            }
        }

        /// `select_zero` from either end, over ranges of any start and length (its groups of
        /// four words included), against a count bit by bit.
        #[test]
        fn select_zero_finds_every_zero(
            words in proptest::collection::vec(any::<u64>(), 1..24),
            start_in in 0u64..1 << 20,
            len_in in 0u64..1 << 20,
        ) {
            let bits = words.len() as u64 * 64;
            let start = start_in % bits;
            let len = len_in % (bits - start + 1);
            let zeros: Vec<u64> = (start..start + len)
                .filter(|&b| !bit(&words, b))
                .map(|b| b - start)
                .collect();
            let n = zeros.len() as u64;
            for t in 0..n + 2 {
                let want = zeros.get(t as usize).copied().unwrap_or(len);
                prop_assert_eq!(select_zero(&words, start, len, n, t), want, "t={}", t);
            }
        }
    }

    #[test]
    fn after_zero_counts_zeros_word_by_word() {
        let words = [0xF0F0_F0F0_F0F0_F0F0u64, !0, 0x0123_4567_89AB_CDEF];
        let bits = words.len() as u64 * 64;
        for upper in [0, 5, 63, 64, 70] {
            for from in [0, 1, 9, 60] {
                // The naive answer: the position after zero number `left` from upper + from.
                let zeros: Vec<u64> = (upper + from..bits).filter(|&b| !bit(&words, b)).collect();
                for left in 0..zeros.len() as u64 + 2 {
                    let naive = zeros.get(left as usize).map(|&z| z - upper + 1);
                    assert_eq!(
                        after_zero(&words, upper, from, left),
                        naive,
                        "{upper} {from} {left}"
                    );
                }
            }
        }
    }

    fn words_for(base: u64, shape: Shape) -> Vec<u64> {
        vec![0; ((base + shape.bits()).div_ceil(64) + 1) as usize]
    }

    /// The bits of a stream written at bit 0, 64 at a time.
    fn stream_bits(words: &[u64], shape: Shape) -> Vec<u64> {
        let bits = shape.bits();
        (0..bits)
            .step_by(64)
            .map(|at| read_bits(words, at, (bits - at).min(64) as u32))
            .collect()
    }

    /// One value whose high part is the bucket count: 2 << 63 wraps to 0, below the universe.
    #[test]
    fn a_high_part_past_the_buckets_is_refused_in_the_largest_universes() {
        let universe = (1 << 63) + 80;
        let shape = Shape::new(1, universe);
        assert_eq!((shape.l, shape.buckets), (63, 2));
        // Low part 0x5c, then the upper bits 0b100: a one at the last of the three.
        let words = [0x0700_0000_0000_005c, 0b10];
        assert_eq!(
            validate(&words, 0, shape, universe),
            Err("value out of range")
        );
    }

    /// `words` and the stream of `set` written afresh, padded with zeros to one length: equal
    /// when an edited stream is the rebuilt one, bits past its end zero included.
    fn beside_rebuilt(
        words: &[u64],
        base: u64,
        shape: Shape,
        set: &BTreeSet<u64>,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut fresh = words_for(base, shape);
        write(&mut fresh, base, shape, set.iter().copied());
        let len = words.len().max(fresh.len());
        fresh.resize(len, 0);
        let mut ours = words.to_vec();
        ours.resize(len, 0);
        (ours, fresh)
    }

    #[test]
    fn shapes() {
        let s = Shape::new(30, 35_511_000_000);
        assert_eq!(s.l, 30);
        assert_eq!(s.bits(), 30 * 31 + (35_510_999_999 >> 30) + 1);
        assert_eq!(Shape::new(0, 100).bits(), 0);
        assert_eq!(Shape::new(100, 100).l, 0);
        assert_eq!(Shape::new(50, 100).l, 1);
        assert_eq!(Shape::new(1, 1).bits(), 2);
    }

    #[test]
    fn bit_helpers() {
        let mut w = vec![0u64; 3];
        write_bits(&mut w, 60, 10, 0x3ff);
        assert_eq!(read_bits(&w, 60, 10), 0x3ff);
        assert_eq!(w[0] >> 60, 0xf);
        assert_eq!(w[1], 0x3f);
        write_bits(&mut w, 0, 64, u64::MAX);
        assert_eq!(read_bits(&w, 0, 64), u64::MAX);
        assert_eq!(read_bits(&w, 61, 3), 0b111);
        for t in 0..64 {
            assert_eq!(select_in_word(u64::MAX, t), t);
        }
        assert_eq!(select_in_word(0b1010_0000, 1), 7);
    }

    /// The stream of `set` at bit `base`, in a universe `universe_above` past its last value,
    /// in words that end with the stream's last.
    pub(crate) fn stream_ending_its_words(
        set: &BTreeSet<u64>,
        universe_above: u64,
        base: u64,
    ) -> (Vec<u64>, Shape) {
        let universe = set.last().unwrap().saturating_add(universe_above);
        let shape = Shape::new(set.len() as u64, universe);
        let mut words = vec![0u64; (base + shape.bits()).div_ceil(64) as usize];
        write(&mut words, base, shape, set.iter().copied());
        (words, shape)
    }

    proptest! {
        /// `fold` (the whole-stream loop) gives the values `next` gives, from wherever the
        /// iterator stands, in a slice that ends with the stream's last word.
        #[test]
        fn fold_continues_where_next_stopped(
            set in proptest::collection::btree_set(any::<u64>(), 1..400),
            universe_above in 1u64..1 << 40,
            base in 0u64..200,
            skip in 0usize..400,
        ) {
            let (words, shape) = stream_ending_its_words(&set, universe_above, base);
            let mut it = iter(&words, base, shape);
            let head: Vec<u64> = it.by_ref().take(skip).collect();
            let mut tail = Vec::new();
            it.for_each(|v| tail.push(v));
            let all: Vec<u64> = set.iter().copied().collect();
            prop_assert_eq!(&all[..head.len()], &head[..]);
            prop_assert_eq!(&all[head.len()..], &tail[..]);
        }

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn inserts_keep_the_stream_equal_to_a_rebuilt_one(
            values in proptest::collection::vec(any::<u64>(), 1..300),
            universe in 1u64..u64::MAX,
            base in 0u64..100,
        ) {
            let mut set = BTreeSet::new();
            let mut shape = Shape::new(0, universe);
            let mut words = vec![0u64; 2];
            for v in values {
                let x = v % universe;
                let probe = find(&words, base, shape, x);
                // The baseline build's path, whichever `find` took on this CPU.
                prop_assert_eq!(&find_in(&words, base, shape, x), &probe);
                prop_assert_eq!(probe.found, set.contains(&x));
                prop_assert_eq!(probe.rank, set.range(..x).count() as u64);
                if probe.found {
                    continue;
                }
                set.insert(x);
                let next = Shape::new(shape.k + 1, universe);
                if next.l == shape.l {
                    words.resize(((base + next.bits()).div_ceil(64) + 1) as usize, 0);
                    insert(&mut words, base, shape, probe.rank, x);
                } else {
                    words = words_for(base, next);
                    write(&mut words, base, next, set.iter().copied());
                }
                shape = next;
                let (ours, fresh) = beside_rebuilt(&words, base, shape, &set);
                prop_assert_eq!(&ours, &fresh);
                prop_assert!(validate(&words, base, shape, universe).is_ok());
            }
            let back: Vec<u64> = iter(&words, base, shape).collect();
            prop_assert_eq!(back, set.iter().copied().collect::<Vec<_>>());
            for &x in &set {
                prop_assert!(find(&words, base, shape, x).found);
            }
        }

        #[test]
        #[cfg_attr(miri, ignore = "too slow under Miri")]
        fn removes_keep_the_stream_equal_to_a_rebuilt_one(
            values in proptest::collection::btree_set(any::<u64>(), 1..300),
            order in any::<u64>(),
            universe in 1u64..u64::MAX,
            base in 0u64..100,
        ) {
            let mut set: BTreeSet<u64> = values.iter().map(|v| v % universe).collect();
            let mut shape = Shape::new(set.len() as u64, universe);
            let mut words = words_for(base, shape);
            write(&mut words, base, shape, set.iter().copied());
            let mut x = order;
            while let Some(&v) = set.iter().nth((x % set.len() as u64) as usize) {
                crate::core::test_rng::step(&mut x);
                let probe = find(&words, base, shape, v);
                prop_assert!(probe.found);
                set.remove(&v);
                let next = Shape::new(shape.k - 1, universe);
                if next.l == shape.l {
                    remove(&mut words, base, shape, probe.rank, v);
                } else {
                    words = words_for(base, next);
                    write(&mut words, base, next, set.iter().copied());
                }
                shape = next;
                let (ours, fresh) = beside_rebuilt(&words, base, shape, &set);
                prop_assert_eq!(&ours, &fresh, "after removing {}", v);
                if set.is_empty() {
                    break;
                }
            }
        }

        /// Whatever the words and the universe (up to 2^64 − 1), a stream that validates
        /// lists values below the universe and is the one encoding of them.
        #[test]
        fn a_valid_stream_is_the_encoding_of_its_values(
            k in 1u64..6,
            universe in prop_oneof![1u64..1_000, (1u64 << 62)..u64::MAX],
            noise in proptest::collection::vec(any::<u64>(), 8),
        ) {
            let universe = universe.max(k);
            let shape = Shape::new(k, universe);
            let mut words = words_for(0, shape);
            for (word, n) in words.iter_mut().zip(&noise) {
                *word = *n;
            }
            if validate(&words, 0, shape, universe).is_ok() {
                let values: Vec<u64> = iter(&words, 0, shape).collect();
                prop_assert!(values.iter().all(|&v| v < universe));
                let mut again = words_for(0, shape);
                write(&mut again, 0, shape, values.iter().copied());
                prop_assert_eq!(stream_bits(&again, shape), stream_bits(&words, shape));
            }
        }

        #[test]
        fn validate_refuses_what_is_not_a_set(
            values in proptest::collection::btree_set(0u64..5_000, 1..200),
            flip in any::<u64>(),
        ) {
            let universe = 5_000;
            let shape = Shape::new(values.len() as u64, universe);
            let mut words = words_for(32, shape);
            write(&mut words, 32, shape, values.iter().copied());
            prop_assert!(validate(&words, 32, shape, universe).is_ok());
            // Flipping a bit gives another valid set or is refused, never a panic.
            let at = 32 + flip % shape.bits();
            let bit = read_bits(&words, at, 1);
            write_bits(&mut words, at, 1, bit ^ 1);
            if validate(&words, 32, shape, universe).is_ok() {
                let again: Vec<u64> = iter(&words, 32, shape).collect();
                prop_assert_eq!(again.len() as u64, shape.k);
                prop_assert!(again.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
