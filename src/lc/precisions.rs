//! Unions with registers of larger precisions than the union's own: what is known of the
//! union at each source's own resolution, and the likelihood over it.
//!
//! # Regions
//!
//! An indicator `(i, k)` at precision `q` is a set of hash values of measure `w_k` (levels.rs).
//! Seen at a smaller precision `q − d` it lies within exactly one indicator (levels.rs, "Items
//! as tokens"): with `b` the `d` index bits dropped, level `k` of residue `s` lies within level
//! `4·lz(b) + s + 1` of register `i >> d` if `b ≠ 0` (`lz`: leading zeros of `b` in `d` bits),
//! within level `k + 4d` if `b = 0`. So the indicators of all precisions nest: two are disjoint
//! or one holds the other.
//!
//! # Evidence
//!
//! The sources of each precision, united register-wise, know of each of their indicators that
//! it is set, unset, or nothing (below a register's window: forgotten). Number the
//! precisions `0, 1, …` from the coarsest. The union's items are those of precision 0's
//! sources, `n_0` of them, then those of precision 1's that precision 0's lack, `ρ_1`, then
//! those of precision 2's that both lack, `ρ_2`, and so on: the union counts
//! `n_0 + ρ_1 + ρ_2 + …`.
//!
//! Within an indicator that precision 0 knows unset, precision 1's items are all of the
//! `ρ_1` kind: what precision 1 knows of its parts there (set, unset, forgotten), at its own
//! resolution, is what a sketch of those items alone would know. Likewise precision 2 within
//! the parts that both coarser ones know unset, and so on. So with Poissonized items the
//! log-likelihood splits into one term per precision, each levels.rs's over its own
//! indicators: precision 0 over all of them (`n_0`), precision `g` over its set and unset
//! indicators within the parts every coarser precision knows unset (`ρ_g`). Each is solved
//! alone (`ml_estimate_by_weight`, each indicator at its own weight), and the count is their
//! sum, its variance the sum of theirs; where one key alone holds items at precision 0, `n_0`
//! is that key's own count, and of several, at least the largest one's
//! (`Evidence::counted_at_p`). What a finer precision knows within a
//! part a coarser one knows set or forgot is left out: a coarser source has items there, or
//! may have, which the finer one does not see. (Which parts a precision speaks for depends
//! on the coarser sources' items elsewhere, not on the items inside them; a register's window
//! depends on its items in parts left out, through their own counts, not through `ρ_g`.)
//!
//! Two ways that count wrong. One likelihood of one count over every precision's indicators
//! within those parts takes precision `g`'s items there for all the union's: a finer counter
//! of half the items united with a 1% counter of the other half counted 12% low. Reducing
//! finer registers to the union's precision first keeps their unset levels but loses their
//! set levels' weights (a high level of a register whose `b ≠ 0` lands in one of the union's
//! lowest groups, set almost surely anyway): such unions counted up to 1.4% low (RMSE 1.65%,
//! at 2·10^5 items in a 0.0025 counter united with an empty 1% one).
//!
//! # What a merge stores
//!
//! Registers at the union's precision holding the indicators some source knows set, each
//! source read alone where several share a precision (`add_known_set`: united first, their
//! windows forget levels one of them knew, which a merge of it alone would then add). A part
//! a finer source forgot is not taken as set: where it falls within a union register's
//! window, that register holds few items, and such parts are then most often empty. Taken as
//! set, they made a merged counter claim more set indicators than its count (which no load
//! accepted) and a recount of it 2–4% high.
//!
//! # Work
//!
//! One pass per union register over the registers of each precision within it, each
//! register's levels a 256-bit mask (`LevelMask`): a few word operations a register, and a
//! step per set level or per group of four unset levels.

use super::counter::LcError;
use super::levels::{max_level, ml_estimate_by_weight, WINDOW, WINDOW_MASK};
use crate::core::alloc::zeroed;

/// A register's levels as bits, bit `k − 1` for level `k` (at most 236 of them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct LevelMask([u64; 4]);

/// Bit 0 of every group of four levels.
const EVERY_GROUP: u64 = 0x1111_1111_1111_1111;

/// Σ over a word's 16 groups of four bits, `t` from the lowest, of the bits set in group `t`
/// times `2^(15 − t)`, without a branch or a table: each group's count, then pairs of
/// neighbours summed with the lower one weighted, then pairs of pairs, and so on.
fn weighted_groups(word: u64) -> u64 {
    const ODD: u64 = 0x5555_5555_5555_5555;
    const PAIRS: u64 = 0x3333_3333_3333_3333;
    let x = word - (word >> 1 & ODD);
    let x = (x & PAIRS) + (x >> 2 & PAIRS);
    let x = (x & 0x0f0f_0f0f_0f0f_0f0f) * 2 + (x >> 4 & 0x0f0f_0f0f_0f0f_0f0f);
    let x = (x & 0x00ff_00ff_00ff_00ff) * 4 + (x >> 8 & 0x00ff_00ff_00ff_00ff);
    let x = (x & 0x0000_ffff_0000_ffff) * 16 + (x >> 16 & 0x0000_ffff_0000_ffff);
    (x & 0xffff_ffff) * 256 + (x >> 32)
}

impl LevelMask {
    /// Levels `1..=k`, each word on its own (a fill of the whole words went through memory,
    /// and the words read back stalled the loop).
    fn up_to(k: u64) -> LevelMask {
        LevelMask(std::array::from_fn(|w| {
            let below = k.saturating_sub(64 * w as u64);
            if below >= 64 {
                u64::MAX
            } else {
                (1 << below) - 1
            }
        }))
    }

    /// `bits` (fewer than 64) moved up by `by`: bit `i` is level `i + by + 1`.
    fn placed(bits: u64, by: u64) -> LevelMask {
        let mut mask = LevelMask::default();
        let (w, shift) = ((by / 64) as usize, by % 64);
        if let Some(word) = mask.0.get_mut(w) {
            *word = bits << shift;
        }
        if let (Some(word), true) = (mask.0.get_mut(w + 1), shift > 0) {
            *word = bits >> (64 - shift);
        }
        mask
    }

    /// Level `k` becomes level `k + by`.
    fn shifted_up(self, by: u64) -> LevelMask {
        let (words, bits) = ((by / 64) as usize, by % 64);
        LevelMask(std::array::from_fn(|w| {
            let Some(from) = w.checked_sub(words) else {
                return 0;
            };
            let low = from.checked_sub(1).map_or(0, |f| self.0[f]);
            if bits == 0 {
                self.0[from]
            } else {
                self.0[from] << bits | low >> (64 - bits)
            }
        }))
    }

    /// Level `k` becomes level `k − by` (levels `≤ by` fall off).
    fn shifted_down(self, by: u64) -> LevelMask {
        let (words, bits) = ((by / 64) as usize, by % 64);
        LevelMask(std::array::from_fn(|w| {
            let Some(&word) = self.0.get(w + words) else {
                return 0;
            };
            let high = self.0.get(w + words + 1).copied().unwrap_or(0);
            if bits == 0 {
                word
            } else {
                word >> bits | high << (64 - bits)
            }
        }))
    }

    fn and(self, other: LevelMask) -> LevelMask {
        LevelMask(std::array::from_fn(|w| self.0[w] & other.0[w]))
    }

    fn or(self, other: LevelMask) -> LevelMask {
        LevelMask(std::array::from_fn(|w| self.0[w] | other.0[w]))
    }

    fn and_not(self, other: LevelMask) -> LevelMask {
        LevelMask(std::array::from_fn(|w| self.0[w] & !other.0[w]))
    }

    /// Whether it holds no level: the words or-ed in registers (as an array comparison, the
    /// words stored just before were loaded back whole, which stalled the loop).
    fn is_empty(self) -> bool {
        self.0.iter().fold(0, |a, w| a | w) == 0
    }

    /// Which residues `s = (k − 1) mod 4` its levels have, bit `s` each.
    fn residues(self) -> u64 {
        let mut x = self.0.iter().fold(0, |a, w| a | w);
        x |= x >> 32;
        x |= x >> 16;
        x |= x >> 8;
        x |= x >> 4;
        x & 0xf
    }

    /// The four levels of group `z` (`4z + 1 ..= 4z + 4`), bit `s` for level `4z + s + 1`.
    fn group(self, z: u64) -> u64 {
        self.0[(z / 16) as usize] >> (4 * (z % 16)) & 0xf
    }

    /// Residues `bits` in group `z`.
    fn in_group(bits: u64, z: u64) -> LevelMask {
        let mut mask = LevelMask::default();
        mask.0[(z / 16) as usize] = bits << (4 * (z % 16));
        mask
    }

    /// Residues `bits` in every group.
    fn in_every_group(bits: u64) -> LevelMask {
        LevelMask([bits * EVERY_GROUP; 4])
    }

    /// The levels register `reg` knows set.
    fn set_of(reg: u32) -> LevelMask {
        LevelMask::in_window(reg, reg, true)
    }

    /// The levels register `reg` (at a precision whose levels are `all`) knows unset: its
    /// window's zeros, and every level above its top.
    fn unset_of(reg: u32, all: LevelMask) -> LevelMask {
        let top = u64::from(reg >> WINDOW);
        LevelMask::in_window(reg, !reg, false).or(all.and_not(LevelMask::up_to(top)))
    }

    /// The levels below the top of register `reg` whose bits are set in `window` (bit `i − 1`
    /// for level `top − i`), and with `top` its top.
    fn in_window(reg: u32, window: u32, top: bool) -> LevelMask {
        let k = u64::from(reg >> WINDOW);
        // Reversed, bit `t` is level `k − 19 + t`, and bit 19 the top.
        let bits = u64::from((window & WINDOW_MASK).reverse_bits() >> (32 - WINDOW))
            | u64::from(top && k > 0) << WINDOW;
        if k > WINDOW {
            LevelMask::placed(bits, k - WINDOW - 1)
        } else {
            // Bits of levels below 1 fall off (they are never set).
            LevelMask([bits >> (WINDOW + 1 - k), 0, 0, 0])
        }
    }

    /// The register that knows exactly these levels within its window: the highest is its
    /// top.
    fn register(self) -> u32 {
        let Some(w) = (0..4).rev().find(|&w| self.0[w] != 0) else {
            return 0;
        };
        let top = 64 * w as u64 + 64 - u64::from(self.0[w].leading_zeros());
        // Bit `t` of `below`: level `top − 19 + t`.
        let below = if top > WINDOW {
            self.shifted_down(top - WINDOW - 1).0[0]
        } else {
            self.shifted_up(WINDOW + 1 - top).0[0]
        };
        let window = (below as u32).reverse_bits() >> (32 - WINDOW);
        (top as u32) << WINDOW | window
    }

    /// The weight of its levels at precision `q` (units of `2^−64`), eight levels a step.
    fn weight(self, q: u32) -> u128 {
        // Group `j` (levels `4j + 1 ..= 4j + 4`) weighs `2^(e − j)` a level up to `j = e`;
        // the last group, `e + 1`, weighs 1 a level, as group `e` does.
        let e = 61 - u64::from(q);
        let mut words = self.0;
        let last = &mut words[((e + 1) / 16) as usize];
        let shift = 4 * ((e + 1) % 16);
        let mut sum = u128::from((*last >> shift & 0xf).count_ones());
        *last &= !(0xf << shift);
        for (w, &word) in (0..).zip(&words) {
            // Σ over the word's groups `t` of (levels set in t)·2^(15 − t), times
            // 2^(e − 16w − 15): exact, since the word holds no group past `e`.
            let s = weighted_groups(word);
            let to = e as i64 - 16 * w - 15;
            sum += if to >= 0 {
                u128::from(s) << to
            } else {
                u128::from(s >> -to)
            };
        }
        sum
    }

    /// Adds its levels at precision `q` to `set`, by weight (`set[e]`: levels of weight
    /// `2^e`, units of `2^−64`), a group of four at a time.
    fn count_by_weight(self, q: u32, set: &mut [u64; 64]) {
        let e = 61 - u64::from(q);
        for (w, &word) in (0u64..).zip(&self.0) {
            let mut rest = word;
            while rest != 0 {
                let shift = rest.trailing_zeros() / 4 * 4;
                // Group `j` weighs `2^(e − j)` a level, the last (`e + 1`) 1.
                let j = 16 * w + u64::from(shift / 4);
                set[e.saturating_sub(j) as usize] += u64::from((rest >> shift & 0xf).count_ones());
                rest &= !(0xf << shift);
            }
        }
    }
}

/// Leading zeros of `b`'s `d` bits (`b ≠ 0`).
fn leading_zeros(b: u64, d: u32) -> u64 {
    u64::from(b.leading_zeros() - (64 - d))
}

/// The levels of a register of precision `q + d`, whose dropped index bits are `b`, that lie
/// within `levels` of the register of precision `q` holding it.
fn lying_within(levels: LevelMask, b: u64, d: u32) -> LevelMask {
    if b == 0 {
        levels.shifted_down(4 * u64::from(d))
    } else {
        LevelMask::in_every_group(levels.group(leading_zeros(b, d)))
    }
}

/// The levels of the register of precision `q` that hold `levels` of a register of precision
/// `q + d`, whose dropped index bits are `b`.
fn containing(levels: LevelMask, b: u64, d: u32) -> LevelMask {
    if b == 0 {
        levels.shifted_up(4 * u64::from(d))
    } else {
        LevelMask::in_group(levels.residues(), leading_zeros(b, d))
    }
}

/// Sets in `coarse` (registers at precision `p`) the levels that the registers at precision
/// `q > p` read by `fine` (by index) know set, as a merge stores them. Sources of one
/// precision are united register-wise first, and a register's window then moves past levels
/// that one of them knew set: stored only from the united registers, a merge of that source
/// alone afterwards would add them.
pub fn add_known_set(coarse: &mut [u32], p: u32, q: u32, fine: impl Fn(usize) -> u32) {
    let d = q - p;
    for (j, c) in coarse.iter_mut().enumerate() {
        // Registers whose dropped bits are not all zero lie within the lowest 4d levels
        // (`containing`), below the window of a register whose top is higher: then only the
        // first can add a level, and the others are not read.
        let reach = match u64::from(*c >> WINDOW) > WINDOW + 4 * u64::from(d) {
            true => 1,
            false => 1 << d,
        };
        let mut known = LevelMask::set_of(*c);
        for b in 0..reach {
            let reg = fine(j << d | b);
            known = known.or(containing(LevelMask::set_of(reg), b as u64, d));
        }
        *c = known.register();
    }
}

/// Registers-mode sources of precisions larger than a union's, united register-wise by
/// precision, in increasing precision.
#[derive(Debug, Default)]
pub struct Finer {
    groups: Vec<(u32, Vec<u32>)>,
}

impl Finer {
    /// The registers of precision `q` (empty at first), to unite sources of it with.
    pub fn registers(&mut self, q: u32) -> Result<&mut [u32], LcError> {
        let at = match self.groups.binary_search_by_key(&q, |g| g.0) {
            Ok(at) => at,
            Err(at) => {
                let registers = zeroed(1 << q).ok_or(LcError::OutOfMemory)?;
                self.groups.insert(at, (q, registers));
                at
            }
        };
        Ok(&mut self.groups[at].1)
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }
}

/// What one precision knows within the parts it speaks for: its set indicators by weight
/// (`set[e]` of weight `2^e` in units of `2^−64`) and its unset weight.
#[derive(Clone, Debug, PartialEq)]
struct Part {
    set: [u64; 64],
    mu: u128,
}

impl Default for Part {
    fn default() -> Part {
        Part {
            set: [0; 64],
            mu: 0,
        }
    }
}

/// What a union knows at its sources' resolutions: a part per precision, coarsest first.
#[derive(Debug, PartialEq)]
pub struct Evidence {
    parts: Vec<Part>,
    /// What the keys seen at the union's precision count themselves (`counted_at_p`).
    at_p: Option<CountedAtP>,
}

/// The count and variance of the keys seen at a union's precision: of the one holding items,
/// or of the largest of several.
#[derive(Clone, Copy, Debug, PartialEq)]
enum CountedAtP {
    Alone(f64, f64),
    Largest(f64, f64),
}

impl Evidence {
    /// The maximum-likelihood estimate and its variance: the sums of the parts', precision
    /// 0's as its keys count (`counted_at_p`).
    pub fn estimate(&self) -> (f64, f64) {
        self.parts
            .iter()
            .enumerate()
            .map(|(g, part)| {
                let ml = ml_estimate_by_weight(&part.set, part.mu);
                match self.at_p {
                    Some(CountedAtP::Alone(n, v)) if g == 0 => (n, v),
                    Some(CountedAtP::Largest(n, v)) if g == 0 && n > ml.0 => (n, v),
                    _ => ml,
                }
            })
            .fold((0.0, 0.0), |(n, v), (pn, pv)| (n + pn, v + pv))
    }

    /// Takes for the items of the union's precision what its `keys` holding items there
    /// count: the count of one alone (`count`, of variance `variance`), or at least that of
    /// the largest of several. A key's registers may have been reduced from finer ones by a
    /// merge, which stored the parts those forgot as unset; estimated afresh from them, such
    /// keys counted 4.5–6.5% low on average in unions with finer keys (a 2% key merged from a
    /// 1% key of 30,000 items, united with a 1% key of 5,000 others), and 7% low with a
    /// second key at their precision.
    pub fn counted_at_p(&mut self, keys: usize, count: f64, variance: f64) {
        self.at_p = match keys {
            0 => None,
            1 => Some(CountedAtP::Alone(count, variance)),
            _ => Some(CountedAtP::Largest(count, variance)),
        };
    }
}

/// A precision's registers within one union register: their levels, as masks.
struct Within {
    q: u32,
    /// Every level of precision `q`.
    all: LevelMask,
    registers: Vec<u32>,
    /// Levels of each register within the parts every coarser precision knows unset: those
    /// it knows unset.
    unset: Vec<LevelMask>,
}

/// The evidence of the union of `coarse` (registers at precision `p`) and `finer`; `coarse`
/// becomes the registers a merge stores.
pub fn resolve(coarse: &mut [u32], p: u32, finer: &Finer) -> Result<Evidence, LcError> {
    let mut scratch: Vec<Within> = Vec::with_capacity(finer.groups.len() + 1);
    for q in std::iter::once(p).chain(finer.groups.iter().map(|g| g.0)) {
        let n = 1usize << (q - p);
        let masks = || {
            let mut masks = Vec::new();
            masks
                .try_reserve_exact(n)
                .map_err(|_| LcError::OutOfMemory)?;
            masks.resize(n, LevelMask::default());
            Ok::<_, LcError>(masks)
        };
        scratch.push(Within {
            q,
            all: LevelMask::up_to(max_level(q)),
            registers: zeroed(n).ok_or(LcError::OutOfMemory)?,
            unset: masks()?,
        });
    }
    let mut evidence = Evidence {
        parts: vec![Part::default(); scratch.len()],
        at_p: None,
    };
    for j in 0..coarse.len() {
        scratch[0].registers[0] = coarse[j];
        for (within, (q, registers)) in scratch[1..].iter_mut().zip(&finer.groups) {
            let d = q - p;
            within
                .registers
                .copy_from_slice(&registers[j << d..(j + 1) << d]);
        }
        coarse[j] = resolve_one(&mut scratch, &mut evidence);
    }
    Ok(evidence)
}

/// Adds one union register's evidence (the registers of each precision within it in
/// `scratch`, coarsest first) to `evidence`; the register a merge stores.
fn resolve_one(scratch: &mut [Within], evidence: &mut Evidence) -> u32 {
    let p = scratch[0].q;
    let mut known = LevelMask::default();
    for (g, part) in evidence.parts.iter_mut().enumerate() {
        let (coarser, rest) = scratch.split_at_mut(g);
        let within = &mut rest[0];
        let (d, all_d) = (coarser.last().map_or(0, |c| within.q - c.q), within.q - p);
        for (i, &reg) in within.registers.iter().enumerate() {
            let set = LevelMask::set_of(reg);
            known = known.or(containing(set, i as u64 & ((1 << all_d) - 1), all_d));
            let spoken_for = match coarser.last() {
                Some(c) => lying_within(c.unset[i >> d], i as u64 & ((1 << d) - 1), d),
                None => within.all,
            };
            // Most often so under a coarser register of many items, whose low levels are all
            // set: this register then adds nothing.
            if spoken_for.is_empty() {
                within.unset[i] = spoken_for;
                continue;
            }
            let unset = LevelMask::unset_of(reg, within.all).and(spoken_for);
            set.and(spoken_for).count_by_weight(within.q, &mut part.set);
            part.mu += unset.weight(within.q);
            within.unset[i] = unset;
        }
    }
    known.register()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lc::levels::tests::random_registers;
    use crate::lc::levels::{level_state, ml_estimate, registers_counts, update, weight};
    use crate::lc::union::reduce_indicator;

    /// A mask's levels, lowest first.
    fn levels(mask: LevelMask) -> impl Iterator<Item = u64> {
        (0..4).flat_map(move |w| {
            let mut rest = mask.0[w];
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let k = 64 * w as u64 + u64::from(rest.trailing_zeros()) + 1;
                    rest &= rest - 1;
                    k
                })
            })
        })
    }

    /// The module doc's evidence and stored registers, an indicator at a time over every
    /// level of every register of every precision (`groups`: coarsest first).
    fn one_by_one(groups: &[(u32, Vec<u32>)]) -> (Evidence, Vec<u32>) {
        let state = |g: usize, i: u64, k: u64| level_state(groups[g].1[i as usize], k);
        let parts = vec![Part::default(); groups.len()];
        let at_p = None;
        let (p, mut evidence) = (groups[0].0, Evidence { parts, at_p });
        let mut stored_levels = vec![Vec::new(); 1 << p];
        for (g, &(q, _)) in groups.iter().enumerate() {
            for (i, k) in (0..1u64 << q).flat_map(|i| (1..=max_level(q)).map(move |k| (i, k))) {
                let spoken_for = (0..g).all(|c| {
                    let (j, l) = reduce_indicator(i, k, q, groups[c].0);
                    state(c, j, l) == Some(false)
                });
                let (known, part) = (
                    state(g, i, k).filter(|_| spoken_for),
                    &mut evidence.parts[g],
                );
                match known {
                    Some(true) => part.set[weight(k, q).trailing_zeros() as usize] += 1,
                    Some(false) => part.mu += u128::from(weight(k, q)),
                    None => {}
                }
                if state(g, i, k) == Some(true) {
                    let (j, l) = reduce_indicator(i, k, q, p);
                    stored_levels[j as usize].push(l);
                }
            }
        }
        let stored = stored_levels
            .iter()
            .map(|levels| levels.iter().fold(0, |r, &k| update(r, k)))
            .collect();
        (evidence, stored)
    }

    fn resolved(groups: &[(u32, Vec<u32>)]) -> (Evidence, Vec<u32>) {
        let mut finer = Finer::default();
        for (q, registers) in &groups[1..] {
            finer.registers(*q).unwrap().copy_from_slice(registers);
        }
        let mut coarse = groups[0].1.clone();
        let evidence = resolve(&mut coarse, groups[0].0, &finer).unwrap();
        (evidence, coarse)
    }

    /// `up_to(k)` holds levels 1 to k, and only `up_to(0)` is empty.
    #[test]
    fn up_to_holds_the_lowest_levels_and_is_empty_only_for_none() {
        for k in 0..=256u64 {
            let mask = LevelMask::up_to(k);
            assert!(levels(mask).eq(1..=k), "{k}");
            assert_eq!(mask.is_empty(), k == 0, "{k}");
        }
    }

    /// A register's masks say what `level_state` says of each level, and its set levels give
    /// the register back.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn masks_are_the_registers_levels() {
        let mut x = 7;
        for q in [4, 9, 20] {
            for n in [0, 3, 40, 2_000, 1 << 22] {
                for reg in random_registers(q, n, &mut x).into_iter().take(64) {
                    let (set, unset) = (
                        LevelMask::set_of(reg),
                        LevelMask::unset_of(reg, LevelMask::up_to(max_level(q))),
                    );
                    for k in 1..=max_level(q) {
                        let bit = |m: LevelMask| levels(m).any(|l| l == k);
                        assert_eq!(
                            level_state(reg, k),
                            match (bit(set), bit(unset)) {
                                (true, false) => Some(true),
                                (false, true) => Some(false),
                                (false, false) => None,
                                _ => panic!("level {k} both set and unset"),
                            },
                            "{reg:#x} level {k}"
                        );
                    }
                    assert_eq!(set.register(), reg);
                    for mask in [set, unset] {
                        let each: u128 = levels(mask).map(|k| u128::from(weight(k, q))).sum();
                        assert_eq!(mask.weight(q), each, "{reg:#x}");
                    }
                    let all = LevelMask::up_to(max_level(q));
                    assert_eq!(all.weight(q), 1 << (64 - q));
                }
            }
        }
    }

    /// The masks' evidence and stored registers are those taken an indicator at a time, for
    /// two and three precisions, from empty registers to full ones.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn resolution_is_the_one_by_one_evidence() {
        let mut x = 19;
        for qs in [&[4u32, 5][..], &[4, 7], &[4, 5, 7], &[5, 6, 9]] {
            for n in [0u64, 5, 60, 400, 5_000, 200_000] {
                let groups: Vec<(u32, Vec<u32>)> = qs
                    .iter()
                    .enumerate()
                    .map(|(g, &q)| (q, random_registers(q, n >> g, &mut x)))
                    .collect();
                let (evidence, stored) = resolved(&groups);
                let (want, want_stored) = one_by_one(&groups);
                assert_eq!(evidence, want, "{qs:?}, {n}");
                assert_eq!(stored, want_stored, "{qs:?}, {n}");
            }
        }
    }

    /// `add_known_set` adds every indicator a finer register knows set, reduced, to the
    /// registers as a union's registers hold them: those it skips add only levels below
    /// their windows.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn known_sets_are_the_reduced_set_indicators() {
        let check = |p: u32, q: u32, coarse: &[u32], fine: &[u32]| {
            let mut want: Vec<LevelMask> = coarse.iter().map(|&r| LevelMask::set_of(r)).collect();
            for i in 0..1u64 << q {
                for k in 1..=max_level(q) {
                    if level_state(fine[i as usize], k) == Some(true) {
                        let (j, l) = reduce_indicator(i, k, q, p);
                        want[j as usize].0[((l - 1) / 64) as usize] |= 1 << ((l - 1) % 64);
                    }
                }
            }
            let want: Vec<u32> = want.into_iter().map(LevelMask::register).collect();
            let mut got = coarse.to_vec();
            add_known_set(&mut got, p, q, |i| fine[i]);
            assert_eq!(got, want, "{p}, {q}");
        };
        let mut x = 29;
        for (p, q) in [(4, 5), (4, 7), (5, 9)] {
            for n in [0u64, 5, 60, 400, 5_000, 200_000] {
                check(
                    p,
                    q,
                    &random_registers(p, n / 3, &mut x),
                    &random_registers(q, n, &mut x),
                );
            }
        }
        // On the bound: a register of top WINDOW + 4d keeps level 4d, where the level of
        // residue 3 of a register whose dropped bit is 1 lands.
        let (p, q) = (4, 5);
        let mut coarse = vec![0; 1 << p];
        coarse[0] = (WINDOW as u32 + 4) << WINDOW;
        let mut fine = vec![0; 1 << q];
        fine[1] = 4 << WINDOW;
        check(p, q, &coarse, &fine);
    }

    /// With nothing in the coarser registers, the union's estimate is the finer registers'
    /// own.
    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn an_empty_coarser_side_leaves_the_finer_estimate() {
        let mut x = 23;
        for (p, q, n) in [(11, 13, 20_000u64), (11, 18, 200_000), (4, 20, 1 << 20)] {
            let fine = random_registers(q, n, &mut x);
            let (evidence, _) = resolved(&[(p, vec![0; 1 << p]), (q, fine.clone())]);
            let (counts, mu) = registers_counts(&fine, q);
            let (want, got) = (ml_estimate(&counts, mu, q), evidence.estimate());
            assert!(
                (got.0 / want.0 - 1.0).abs() < 1e-9,
                "{p} {q}: {got:?} {want:?}"
            );
            assert!(
                (got.1 / want.1 - 1.0).abs() < 1e-6,
                "{p} {q}: {got:?} {want:?}"
            );
        }
    }
}
