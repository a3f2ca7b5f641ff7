//! A RedisBloom scaling chain (`SBChain`): links oldest first, RedisBloom's add and growth
//! rules, and the figures `BF.INFO` reports for it; served to the `BF.*` commands as every
//! Bloom filter is (`filter.rs`).

use super::link::{Link, LinkParams, FORCE64, NOROUND, NO_SCALING};
use super::murmur::HashPair;
use super::DecodeError;
use crate::bloom::chain::ChainError;
use crate::core::alloc::{self, size_class};
use crate::core::batch;
use crate::core::defrag::Defrag;
use std::ops::Range;

/// Most links a chain may have. RedisBloom 2.8.2 asserts (aborts the server) when it loads
/// 1000 or more, so a chain that is to go back to it must stay below.
pub const MAX_LINKS: usize = 999;

/// A chain as RedisBloom holds it; `size` always equals the sum of the links' sizes.
#[derive(Clone, Debug, PartialEq)]
pub struct RedisBloomChain {
    size: u64,
    options: u32,
    growth: u32,
    links: Vec<Link>,
}

/// A zeroed bit array of `bytes` bytes, allocated fallibly.
pub fn zeroed(bytes: u64) -> Result<Vec<u8>, ChainError> {
    usize::try_from(bytes)
        .ok()
        .and_then(alloc::zeroed)
        .ok_or(ChainError::OutOfMemory)
}

/// Memory of a chain with a list of `links` links and bit arrays taking `arrays` bytes, each
/// in its size class (`array_bytes`): what `memory_bytes` will count, known before allocating.
pub fn memory_bytes_for(links: u64, arrays: u64) -> Option<u64> {
    let list = links.checked_mul(std::mem::size_of::<Link>() as u64)?;
    size_class(list)
        .checked_add(size_class(std::mem::size_of::<RedisBloomChain>() as u64))?
        .checked_add(arrays)
}

/// What a bit array of `bytes` bytes takes: its allocator size class (`u64::MAX` for a length
/// no allocation has, which a hostile value may claim: its rounding must not wrap).
pub fn array_bytes(bytes: u64) -> u64 {
    match bytes <= u64::MAX / 2 {
        true => size_class(bytes),
        false => u64::MAX,
    }
}

impl RedisBloomChain {
    /// A chain made as RedisBloom 2.8.2's `BF.RESERVE` makes it (options FORCE64|NOROUND, and
    /// NO_SCALING when `growth` is None; the first link at half the error when scaling).
    pub fn reserve(
        error: f64,
        capacity: u64,
        growth: Option<u32>,
        limit: u64,
    ) -> Result<Self, ChainError> {
        let (options, first_error, growth) = match growth {
            Some(g) => (FORCE64 | NOROUND, error * 0.5, g),
            None => (FORCE64 | NOROUND | NO_SCALING, error, 2),
        };
        let params =
            LinkParams::init(capacity, first_error, options).ok_or(ChainError::CannotGrow)?;
        let mut chain = RedisBloomChain {
            size: 0,
            options,
            growth,
            links: Vec::new(),
        };
        chain.push_link(params, limit)?;
        Ok(chain)
    }

    /// A chain from decoded parts, checked as a whole (each link is checked by its decoder):
    /// 1..=MAX_LINKS links, known options, Σ link sizes = size. Any growth: RedisBloom keeps
    /// `EXPANSION` in 32 bits, so a multiple of 2^32 is stored as 0, and such a chain cannot
    /// grow (its next link would hold 0 items: the add fails, as in RedisBloom).
    pub fn from_parts(
        size: u64,
        options: u32,
        growth: u32,
        links: Vec<Link>,
    ) -> Result<Self, DecodeError> {
        check_chain_fields(size, options, links.len() as u64, || {
            links
                .iter()
                .try_fold(0u64, |sum, l| sum.checked_add(l.size))
        })?;
        Ok(RedisBloomChain {
            size,
            options,
            growth,
            links,
        })
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    pub fn options(&self) -> u32 {
        self.options
    }

    pub fn growth(&self) -> u32 {
        self.growth
    }

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    pub fn links_mut(&mut self) -> &mut [Link] {
        &mut self.links
    }

    pub fn force64(&self) -> bool {
        self.options & FORCE64 != 0
    }

    /// The hash pair this chain probes with.
    pub fn hash(&self, item: &[u8]) -> HashPair {
        HashPair::of(item, self.force64())
    }

    /// `BF.INFO` Capacity: Σ entries (wrapping, as RedisBloom's size_t sum).
    pub fn capacity(&self) -> u64 {
        self.links
            .iter()
            .fold(0u64, |c, l| c.wrapping_add(l.params.entries))
    }

    /// `BF.INFO` Size: RedisBloom's own accounting, 32 + Σ (64 + bytes).
    pub fn redisbloom_size(&self) -> u64 {
        self.links.iter().fold(32u64, |s, l| {
            s.wrapping_add(64).wrapping_add(l.params.bytes)
        })
    }

    /// `BF.INFO` Expansion rate: None for NONSCALING.
    pub fn expansion(&self) -> Option<u32> {
        (self.options & NO_SCALING == 0).then_some(self.growth)
    }

    pub fn data_bytes(&self) -> u64 {
        self.links.iter().map(|l| l.params.bytes).sum()
    }

    /// Bytes the chain occupies in this process (`MEMORY USAGE`): each allocation (the box
    /// Redis holds, the list of links, each bit array) rounded up to the allocator's size
    /// class. Budgets (`max-memory-per-key`) use [`memory_bytes_for`], known before allocating.
    /// Visits the chain's blocks for defragmentation (`core::defrag`): the list of links,
    /// then each link's bit array.
    pub fn defrag(&mut self, d: &mut Defrag) {
        d.vec(&mut self.links);
        self.links.iter_mut().for_each(|link| d.vec(&mut link.data));
    }

    pub fn memory_bytes(&self) -> u64 {
        let links = self.links.capacity() as u64;
        memory_bytes_for(links, self.arrays_bytes()).unwrap_or(u64::MAX)
    }

    /// Bytes its bit arrays take, each in its size class.
    fn arrays_bytes(&self) -> u64 {
        let arrays = self
            .links
            .iter()
            .map(|l| array_bytes(l.data.capacity() as u64));
        arrays.sum()
    }

    pub fn contains(&self, hash: &HashPair) -> bool {
        self.links.iter().rev().any(|l| l.contains(hash))
    }

    /// RedisBloom's add: Ok(false) if present (nothing changes), else into the newest link,
    /// growing the chain first when that link is full. Growth never takes the key over `limit`.
    pub fn add(&mut self, hash: &HashPair, limit: u64) -> Result<bool, ChainError> {
        if self.contains(hash) {
            return Ok(false);
        }
        // A loaded chain may claim up to 2^64 − 1 items (loaders check only that the links'
        // counts sum to it): an add that would wrap the count is refused. The links' counts
        // sum to it, so none of them can wrap.
        let size = self.size.checked_add(1).ok_or(ChainError::Overflow)?;
        let last = self.links.last().expect("a chain has a link");
        if last.size >= last.params.entries {
            if self.options & NO_SCALING != 0 {
                return Err(ChainError::Full);
            }
            let next = last
                .params
                .entries
                .checked_mul(self.growth as u64)
                .and_then(|n| LinkParams::init(n, last.params.error * 0.5, self.options))
                .ok_or(ChainError::CannotGrow)?;
            if self.links.len() >= MAX_LINKS {
                return Err(ChainError::CannotGrow);
            }
            self.push_link(next, limit)?;
        }
        let last = self.links.last_mut().expect("a chain has a link");
        last.insert(hash);
        last.size += 1;
        self.size = size;
        Ok(true)
    }

    /// `add` for each item in order, passing each result to `done` and stopping after the first
    /// error; the lines of large links are prefetched a window of items at a time
    /// (`core::batch`): the first probe of each (where a new item is refused), and every probe
    /// of the newest (where it is written).
    pub fn add_batch(
        &mut self,
        hashes: &[HashPair],
        limit: u64,
        mut done: impl FnMut(Result<bool, ChainError>),
    ) {
        let newest = self.links.last().filter(|l| l.prefetched());
        let lines = self.prefetched_lines(0..1) + newest.map_or(0, |l| l.params.hashes - 1);
        let prefetch = |chain: &Self, hash: &HashPair| {
            chain.prefetch(hash, 0..1);
            if let Some(newest) = chain.links.last().filter(|l| l.prefetched()) {
                newest.prefetch(hash, 1..u32::MAX);
            }
        };
        batch::in_windows(hashes, lines as usize, self, prefetch, |chain, hash| {
            let result = chain.add(hash, limit);
            let go_on = result.is_ok();
            done(result);
            go_on
        });
    }

    /// `contains` for each item in order; the lookups of large links go in the two rounds of
    /// `core::batch::lookups`.
    pub fn contains_batch(&self, hashes: &[HashPair], mut found: impl FnMut(bool)) {
        match self.links.iter().any(Link::prefetched) {
            true => batch::lookups(self, hashes, &mut found),
            false => hashes.iter().for_each(|h| found(self.contains(h))),
        }
    }

    /// Lines a lookup reads for `probes` in the large links.
    fn prefetched_lines(&self, probes: Range<u32>) -> u32 {
        let lines = |l: &Link| probes.end.min(l.params.hashes).saturating_sub(probes.start);
        self.links
            .iter()
            .filter(|l| l.prefetched())
            .map(lines)
            .sum()
    }

    /// Starts loading the lines of the item's `probes` in every large link.
    fn prefetch(&self, hash: &HashPair, probes: Range<u32>) {
        self.links
            .iter()
            .filter(|l| l.prefetched())
            .for_each(|l| l.prefetch(hash, probes.clone()));
    }

    /// A deep copy, allocated fallibly (`COPY` must not abort the server).
    pub fn try_clone(&self) -> Result<Self, ChainError> {
        let links = alloc::try_map(&self.links, 0, ChainError::OutOfMemory, |l| {
            let mut data = zeroed(l.params.bytes)?;
            data.copy_from_slice(&l.data);
            Ok(Link { data, ..*l })
        })?;
        Ok(RedisBloomChain { links, ..*self })
    }

    fn push_link(&mut self, params: LinkParams, limit: u64) -> Result<(), ChainError> {
        let needed = memory_bytes_for(
            self.links.len() as u64 + 1,
            self.arrays_bytes()
                .saturating_add(array_bytes(params.bytes)),
        )
        .unwrap_or(u64::MAX);
        if needed > limit {
            return Err(ChainError::TooLarge { needed, limit });
        }
        self.links
            .try_reserve_exact(1)
            .map_err(|_| ChainError::OutOfMemory)?;
        let data = zeroed(params.bytes)?;
        self.links.push(Link {
            params,
            size: 0,
            data,
        });
        Ok(())
    }
}

/// A lookup in `batch::lookups`' two rounds: the first probe of every link, then the whole
/// lookup for the items that passed.
impl batch::Lookup<HashPair> for RedisBloomChain {
    fn rest_lines(&self) -> usize {
        self.prefetched_lines(1..u32::MAX) as usize
    }

    // The links' probes are found again by their tests (positions of several links).
    fn rest_positions(&self) -> usize {
        0
    }

    fn locate_first(&self, hash: &HashPair) -> u64 {
        self.prefetch(hash, 0..1);
        0
    }

    fn first(&self, hash: &HashPair, _: u64) -> bool {
        self.links.iter().any(|l| l.probes_set(hash, 0..1))
    }

    fn locate_rest(&self, hash: &HashPair, _: &mut [u64]) {
        self.prefetch(hash, 1..u32::MAX)
    }

    fn rest(&self, hash: &HashPair, _: &[u64]) -> bool {
        self.contains(hash)
    }
}

/// Whether link `index` of `links` is one RedisBloom failed to make, which decoders drop:
/// when `bloom_init` refuses a new link (0 entries, from growth 0; an error rate halved to 0),
/// RedisBloom still appends it, without a bit array, and saves it. It holds nothing, and while
/// it is last RedisBloom answers every lookup "present". Only a last link after another is
/// dropped (where RedisBloom leaves it), so the chain answers for what it holds and an add
/// that needs a new link fails again.
pub fn is_unmade_last(index: u64, links: u64, params: &LinkParams, size: u64) -> bool {
    index > 0 && index + 1 == links && params.bytes == 0 && size == 0
}

/// A link count outside 1..=MAX_LINKS.
pub const BAD_LINK_COUNT: DecodeError =
    DecodeError("bad RedisBloom data: number of filters out of range");

/// The chain-level checks shared by every decoder; `link_sizes` sums the links' sizes (None on
/// overflow) and only runs once the cheap checks pass.
pub fn check_chain_fields(
    size: u64,
    options: u32,
    links: u64,
    link_sizes: impl FnOnce() -> Option<u64>,
) -> Result<(), DecodeError> {
    if links == 0 || links > MAX_LINKS as u64 {
        return Err(BAD_LINK_COUNT);
    }
    if options & !super::link::ALL_OPTIONS != 0 {
        return Err(DecodeError("bad RedisBloom data: unknown options"));
    }
    if link_sizes() != Some(size) {
        return Err(DecodeError(
            "bad RedisBloom data: item count does not match the filters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(c: &RedisBloomChain) -> Vec<(u64, f64, u32, u64)> {
        c.links()
            .iter()
            .map(|l| {
                (
                    l.params.entries,
                    l.params.error,
                    l.params.hashes,
                    l.params.bits,
                )
            })
            .collect()
    }

    fn fill(c: &mut RedisBloomChain, n: u32) {
        for i in 0..n {
            c.add(&c.hash(format!("i{i}").as_bytes()), u64::MAX)
                .unwrap();
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "too slow under Miri")]
    fn batches_match_one_by_one() {
        // A large non-scaling link (its batches go in prefetched windows), a scaling chain
        // grown past a large first link (two large links), and a small one (no prefetching),
        // which fills up mid-batch: the batch stops at the error, as one-by-one adds do.
        let mut grown = RedisBloomChain::reserve(0.01, 600_000, Some(2), u64::MAX).unwrap();
        fill(&mut grown, 700_000);
        let chains = [
            RedisBloomChain::reserve(0.01, 1_000_000, None, u64::MAX).unwrap(),
            grown,
            RedisBloomChain::reserve(0.01, 1000, None, u64::MAX).unwrap(),
        ];
        assert!(chains[0].links[0].prefetched() && chains[1].links[1].prefetched());
        for chain in chains {
            let hashes: Vec<HashPair> = (0..3000)
                .map(|i| chain.hash(format!("b{}", i * 7 % 2900).as_bytes()))
                .collect();
            let mut one = chain.try_clone().unwrap();
            let mut expected = Vec::new();
            for h in &hashes {
                expected.push(one.add(h, u64::MAX));
                if expected.last().unwrap().is_err() {
                    break;
                }
            }
            let (mut batch, mut got) = (chain, Vec::new());
            for chunk in hashes.chunks(300) {
                batch.add_batch(chunk, u64::MAX, |r| got.push(r));
                if got.last().unwrap().is_err() {
                    break;
                }
            }
            assert_eq!((got, &batch), (expected, &one));
            let probes: Vec<HashPair> = (0..6000)
                .map(|i| batch.hash(format!("b{i}").as_bytes()))
                .collect();
            let mut found = Vec::new();
            batch.contains_batch(&probes, |f| found.push(f));
            let singles: Vec<bool> = probes.iter().map(|p| one.contains(p)).collect();
            assert_eq!(found, singles);
        }
    }

    #[test]
    fn growth_matches_redisbloom_chains() {
        // redisbloom-format.md §3.5 (live DUMPs of RedisBloom 2.8.2).
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        fill(&mut c, 300);
        assert_eq!(
            shapes(&c),
            [
                (10, 0.005, 8, 128),
                (20, 0.0025, 9, 256),
                (40, 0.00125, 10, 576),
                (80, 0.000625, 11, 1280),
                (160, 0.0003125, 12, 2688)
            ]
        );
        assert_eq!(c.capacity(), 310);
        let mut c = RedisBloomChain::reserve(0.001, 10, Some(4), u64::MAX).unwrap();
        fill(&mut c, 800);
        assert_eq!(
            shapes(&c),
            [
                (10, 0.0005, 11, 192),
                (40, 0.00025, 12, 704),
                (160, 0.000125, 13, 3008),
                (640, 6.25e-05, 14, 12928)
            ]
        );
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(1), u64::MAX).unwrap();
        fill(&mut c, 55);
        assert_eq!(c.links().len(), 6);
        assert_eq!(c.links()[5].params.hashes, 13);
        assert_eq!(c.links()[5].params.bits, 192);
    }

    #[test]
    fn probe_positions_match_the_spec_vectors() {
        let mut c = RedisBloomChain::reserve(0.01, 100, Some(2), u64::MAX).unwrap();
        for item in ["foo", "bar", "hello world"] {
            assert_eq!(c.add(&c.hash(item.as_bytes()), u64::MAX), Ok(true));
        }
        let expected: Vec<u64> = [
            269, 847, 145, 723, 21, 599, 25, 475, 611, 851, 67, 307, 675, 915, 131, 371, 609, 791,
            973, 1027, 57, 111, 293, 475,
        ]
        .to_vec();
        let mut want = vec![0u8; 144];
        for x in expected {
            want[(x >> 3) as usize] |= 1 << (x & 7);
        }
        assert_eq!(c.links()[0].data, want);
        assert!(!c.contains(&c.hash(b"baz")));
        assert!(!c.contains(&c.hash(b"qux")));

        let mut g = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        fill(&mut g, 50);
        assert_eq!(g.links().len(), 3);
        assert!(!g.contains(&g.hash(b"zz-not-here")));
        let probes = |link: usize, item: &str| {
            let h = g.hash(item.as_bytes());
            let m = g.links()[link].params.modulus();
            (0..g.links()[link].params.hashes)
                .map(|i| h.probe(i) % m)
                .collect::<Vec<_>>()
        };
        assert_eq!(probes(0, "i0"), [87, 120, 25, 58, 91, 124, 29, 62]);
        assert_eq!(probes(1, "i25"), [26, 98, 170, 242, 58, 130, 202, 18, 90]);
        assert_eq!(
            probes(2, "i45"),
            [109, 305, 501, 249, 445, 65, 261, 457, 77, 401]
        );
    }

    #[test]
    fn legacy_32_bit_probes_match_the_spec_vectors() {
        let h = HashPair::of(b"foo", false);
        let probes = |m: u64, k: u32| (0..k).map(|i| h.probe(i) % m).collect::<Vec<_>>();
        assert_eq!(probes(1 << 11, 7), [1744, 1317, 890, 463, 36, 1657, 1230]);
        assert_eq!(probes(1920, 7), [1616, 1829, 122, 335, 548, 761, 974]);
        assert_eq!(probes(1102, 8), [4, 1037, 968, 899, 830, 761, 692, 623]);
        let h = HashPair::of(b"foo", true);
        let c = RedisBloomChain::reserve(0.001, 1000, None, u64::MAX).unwrap();
        let m = c.links()[0].params.modulus();
        assert_eq!(m, 14400);
        let got: Vec<u64> = (0..10).map(|i| h.probe(i) % m).collect();
        assert_eq!(
            got,
            [8909, 12367, 12241, 1299, 1173, 4631, 8089, 7963, 11421, 479]
        );
    }

    #[test]
    fn nonscaling_fills_up_and_present_items_change_nothing() {
        let mut c = RedisBloomChain::reserve(0.01, 100, None, u64::MAX).unwrap();
        let mut added = 0;
        let mut full = false;
        for i in 0..200 {
            match c.add(&c.hash(format!("x{i}").as_bytes()), u64::MAX) {
                Ok(a) => added += a as u64,
                Err(e) => {
                    assert_eq!(e, ChainError::Full);
                    full = true;
                    break;
                }
            }
        }
        assert!(full);
        assert_eq!(c.size(), added);
        assert_eq!(c.size(), 100);
        let before = c.clone();
        assert_eq!(c.add(&c.hash(b"x0"), u64::MAX), Ok(false));
        assert_eq!(c, before);
        assert_eq!(c.expansion(), None);
        assert_eq!(c.redisbloom_size(), 32 + 64 + 120);
    }

    #[test]
    fn growth_respects_the_limit_and_leaves_the_chain_unchanged() {
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        fill(&mut c, 10);
        let before = c.clone();
        let limit = c.memory_bytes() + 10;
        let err = c.add(&c.hash(b"one more"), limit).unwrap_err();
        assert!(matches!(err, ChainError::TooLarge { .. }));
        assert_eq!(c, before);
        assert!(c.try_clone().unwrap() == c);
    }

    #[test]
    fn chain_checks() {
        assert!(check_chain_fields(0, 5, 0, || Some(0)).is_err());
        assert!(check_chain_fields(0, 5, 1000, || Some(0)).is_err());
        assert!(check_chain_fields(0, 16, 1, || Some(0)).is_err());
        assert!(check_chain_fields(0, 5, 1, || Some(0)).is_ok());
        assert!(check_chain_fields(3, 5, 1, || Some(2)).is_err());
        assert!(check_chain_fields(3, 5, 1, || None).is_err());
    }

    #[test]
    fn answers_the_same_after_defrag_moved_every_block() {
        use crate::core::defrag::tests::in_steps;
        let mut c = RedisBloomChain::reserve(0.01, 10, Some(2), u64::MAX).unwrap();
        fill(&mut c, 300);
        let before = c.clone();
        assert!(in_steps(&mut c, 1, |c, d| c.defrag(d)) > 3);
        assert_eq!(c, before);
        assert!((0..300).all(|i| c.contains(&c.hash(format!("i{i}").as_bytes()))));
    }
}
