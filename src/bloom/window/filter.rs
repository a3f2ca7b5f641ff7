//! A Bloom filter over a sliding time window (pure): it remembers each item for `window` after
//! it was last added, then forgets it.
//!
//! Time. Every operation takes the time (ms) as an argument; nothing here reads a clock. The
//! filter keeps its own time T, the latest time a write brought; an operation at `now` works
//! at max(T, now), so a clock that goes backwards never makes an item older than it was. Time
//! is cut into slots of window/SLOTS; slot(t) = ⌊t / slot_ms⌋.
//!
//! Semantics. An add at time t stores the item's fingerprint in the generation of slot(t),
//! which stays live while slot(now) ≤ slot(t) + SLOTS, that is until
//! (slot(t) + SLOTS + 1)·slot_ms ∈ (t + window, t + window + slot_ms]: an item is found at every
//! moment before t + window (no false negatives), and gone no later than t + 1.25·window.
//! Adding an item again puts it in the newest generation, restarting its window: the add
//! answers "probably present" (false) if it was found anywhere, "new" (true) if not. Found in
//! an older generation of the newest layer, its fingerprint moves (`Layer::move_up`), so
//! re-adds use no more of the capacity: any other item of that fingerprint is still found,
//! for longer. Found in an earlier layer (the filter scaled), it is stored in the newest too
//! and its old copy kept: places differ between layers, so the old copy may be another
//! item's only one.
//!
//! Capacity and scaling. Items go to the newest layer (`layer.rs`). A layer of capacity n
//! accepts items while its live generations hold fewer than its budget of 1.25·n: a stream of
//! at most n items per window stays within it as long as no window's worth arrives within one
//! slot of another (at most n + the slot of slack). A steady stream at capacity fills a layer
//! to between n and 1.25·n. Past the budget:
//! * non-scaling (expansion 0): the add is refused (`ChainError::Full`), until old items slide
//!   out of the window and make room;
//! * scaling (expansion e ≥ 1): a new layer of capacity e × the newest's takes the adds.
//!   Error budget as in a scaling chain (`budget::WINDOW`): the first layer gets 0.8·p, and
//!   each new one half of what the live layers leave, so the compound rate (at most the sum
//!   of the live layers' rates) stays ≤ p; a new scaling filter must have room for 20
//!   layers, as a chain must for 20 sub-filters. A layer whose generations all slid
//!   out is dropped once the sweep has freed its partitions, giving its budget back.
//!
//! Forgetting costs O(1) per write: a write moves the layers' slot counts forward (GENS
//! entries), the partition it adds to and `layer::SWEEP` others, and drops a dead layer only
//! when its memory is already gone. Reads never change anything.

use super::layer::{Layer, LayerParams, Place, REFRESHED_BYTES};
use super::partition::SLOTS;
use crate::bloom::any::{AddResults, Added};
use crate::bloom::budget::WINDOW;
use crate::bloom::chain::ChainError;
use crate::bloom::filter::MIN_ERROR_RATE;
use crate::core::alloc::{self, size_class};
use crate::core::defrag::Defrag;
use crate::core::hashing::{hash_item_seeded, ItemHash};

/// Most layers a filter may have (scaling ×2 from capacity 1 reaches 2^50 in 50).
pub const MAX_LAYERS: usize = 64;
/// Latest time a filter may hold, ms (far beyond any clock; keeps slot arithmetic exact).
pub const MAX_TIME: u64 = 1 << 62;
/// Largest window, seconds: 100 years.
pub const MAX_WINDOW_SECS: u32 = 100 * 365 * 24 * 3600;
/// Bytes of the box a key's value takes: the filter and the pointer to its load state
/// (`value::Windowed`, which checks the sum). Limits weigh a filter with it, as the key's
/// size does, so that a filter made within a limit is loaded within it.
pub const VALUE_BOX_BYTES: u64 =
    size_class((std::mem::size_of::<WindowFilter>() + std::mem::size_of::<usize>()) as u64);

/// A windowed filter's parameters, fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowParams {
    /// Whole seconds (`WINDOW seconds`), at most `MAX_WINDOW_SECS`: 32 bits, beside the
    /// expansion's, keep a small key's value in a 64-byte block.
    pub window_secs: u32,
    pub error_rate: f64,
    /// Items per window.
    pub capacity: u64,
    /// 0: non-scaling.
    pub expansion: u32,
    /// The hash seed of its items (0: none, the hash of filters made before seeds existed).
    pub seed: u64,
}

impl WindowParams {
    pub fn window_ms(&self) -> u64 {
        u64::from(self.window_secs) * 1000
    }

    pub fn slot_ms(&self) -> u64 {
        self.window_ms() / SLOTS as u64
    }

    /// Whether a window of `window_ms` is whole seconds (a second is cut into `SLOTS` slots
    /// of whole milliseconds), at most `MAX_WINDOW_SECS`: what an encoded one must be.
    pub fn valid_window(window_ms: u64) -> bool {
        window_ms.is_multiple_of(1000) && (1..=MAX_WINDOW_SECS as u64).contains(&(window_ms / 1000))
    }

    /// The first layer's error rate. A filter that never grows pays log2(1/0.8) = 0.3 bit
    /// per stored item for the room to grow.
    fn head_rate(&self) -> f64 {
        match self.expansion {
            0 => self.error_rate,
            _ => WINDOW.head_rate(self.error_rate),
        }
    }
}

/// A batch is stored at once (`WindowFilter::add_all`) while the newest slot holds at most
/// this many fingerprints per item of the batch, each of which the batch re-codes: re-coding
/// one (about 120 instructions) costs about a ninth of storing an item by itself (1,100: its
/// shift into the set and the set's growth), so past eight the batch costs more, and at six
/// it still saves a quarter of the items' stores.
const RECODED_PER_ADD: u64 = 6;

#[derive(Debug, PartialEq)]
pub struct WindowFilter {
    params: WindowParams,
    /// The latest time (ms) a write brought.
    time: u64,
    /// Oldest first; the last takes the adds. A boxed slice, exactly as long as the layers
    /// (what a loaded filter holds too), rather than a `Vec`: a small key's value fits 64
    /// bytes.
    layers: Box<[Layer]>,
}

impl WindowFilter {
    /// An empty filter, its time 0 until a write brings one, if its first layer at its
    /// budget fits in `limit` bytes, the value's box included (`VALUE_BOX_BYTES`).
    pub fn new(params: WindowParams, limit: u64) -> Result<Self, ChainError> {
        if !(1..=MAX_WINDOW_SECS).contains(&params.window_secs) || params.capacity == 0 {
            return Err(ChainError::Overflow);
        }
        if !(MIN_ERROR_RATE..1.0).contains(&params.head_rate()) {
            return Err(ChainError::WindowErrorRate);
        }
        let mut filter = Self {
            params,
            time: 0,
            layers: Box::default(),
        };
        let lp = filter.layer_params(params.capacity, params.head_rate(), limit)?;
        let layer = Layer::new(lp, 0).ok_or(ChainError::OutOfMemory)?;
        filter.relist(|_, _| true, Some(layer))?;
        Ok(filter)
    }

    /// A filter of validated parts (`codec.rs`), its layers' vector allocated to their
    /// number.
    pub fn from_parts(params: WindowParams, time: u64, layers: Vec<Layer>) -> Self {
        Self {
            params,
            time,
            layers: layers.into_boxed_slice(),
        }
    }

    pub fn params(&self) -> &WindowParams {
        &self.params
    }

    pub fn time(&self) -> u64 {
        self.time
    }

    /// An item's hash under the filter's seed: what its lookups and adds take.
    #[inline(always)]
    pub fn hash(&self, item: &[u8]) -> ItemHash {
        hash_item_seeded(item, self.params.seed)
    }

    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    pub fn layers_mut(&mut self) -> &mut [Layer] {
        &mut self.layers
    }

    /// The time an operation at `now` works at.
    fn at(&self, now: u64) -> u64 {
        self.time.max(now).min(MAX_TIME)
    }

    /// The oldest live slot at time `t`.
    fn oldest(&self, t: u64) -> u64 {
        (t / self.params.slot_ms()).saturating_sub(SLOTS as u64)
    }

    /// Whether the item was added within the window ending at `now` (or is a false positive).
    pub fn contains(&self, hash: &ItemHash, now: u64) -> bool {
        let oldest = self.oldest(self.at(now));
        self.layers
            .iter()
            .rev()
            .any(|l| l.find(l.place(hash), oldest).is_some())
    }

    /// Adds an item at time `now` (see the module's semantics). An add that finds the item in
    /// the newest generation, or is refused, changes nothing (the filter's time included);
    /// one that stores it moves the filter's time to max(T, now).
    pub fn add(&mut self, hash: &ItemHash, now: u64, limit: u64) -> Result<Added, ChainError> {
        let t = self.at(now);
        let (head, oldest) = (t / self.params.slot_ms(), self.oldest(t));
        let mut found = None;
        for (i, layer) in self.layers.iter().enumerate().rev() {
            if let Some(slot) = layer.find(layer.place(hash), oldest) {
                if slot == head {
                    return Ok(Added::Present);
                }
                found = Some((i, slot));
                break;
            }
        }
        // A copy in the layer that takes the add (the newest) moves: the layer holds no more
        // than before, so its budget is not asked.
        let newest = self.layers.len() - 1;
        let moved = found.filter(|&(i, _)| i == newest).map(|(_, slot)| slot);
        let layer = &self.layers[newest];
        if moved.is_none() && layer.live_items(head) >= layer.params().budget() {
            self.scale(head, limit)?;
        }
        self.advance(t);
        let layer = self.layers.last_mut().expect("a filter has a layer");
        let at = layer.place(hash);
        match moved {
            Some(from) => layer.move_up(at, from),
            None => layer.insert(at, found.map(|(_, slot)| slot)),
        }
        .map_err(|_| ChainError::OutOfMemory)?;
        Ok(match found {
            Some(_) => Added::Refreshed,
            None => Added::New,
        })
    }

    /// Adds items at time `now` as `add` would one after the other, each result pushed to
    /// `results`, stopping after the first error. A batch that scales nothing (the newest
    /// layer has room for every item) and refreshes or moves nothing (no item is in a live
    /// slot but the newest) is stored at once (`add_at_once`); any other, one item at a time.
    pub fn add_all(&mut self, hashes: &[ItemHash], now: u64, limit: u64, results: &mut AddResults) {
        if self.add_at_once(hashes, now, results) {
            return;
        }
        for hash in hashes {
            let result = self.add(hash, now, limit);
            let stop = result.is_err();
            results.push(result);
            if stop {
                return;
            }
        }
    }

    /// `add_all` of a batch of new items and items in the newest slot, their fingerprints
    /// stored with one re-coding of each partition's newest set (`Layer::insert_all`) in the
    /// state their adds one after the other reach, the layers moved as each add moves them.
    /// False, with nothing done, for any other batch, and for one that re-coding would cost
    /// more than it saves (see `RECODED_PER_ADD`).
    fn add_at_once(&mut self, hashes: &[ItemHash], now: u64, results: &mut AddResults) -> bool {
        let t = self.at(now);
        let (head, oldest) = (t / self.params.slot_ms(), self.oldest(t));
        let layer = &self.layers[self.layers.len() - 1];
        let n = hashes.len() as u64;
        let room = layer
            .params()
            .budget()
            .saturating_sub(layer.live_items(head));
        if n < 2 || n > room || layer.newest_items(head) > RECODED_PER_ADD * n {
            return false;
        }
        // The new items' places in the newest layer, with their positions in the batch.
        let mut new = Vec::new();
        if new.try_reserve_exact(hashes.len()).is_err() {
            return false;
        }
        for (i, hash) in hashes.iter().enumerate() {
            match self
                .layers
                .iter()
                .rev()
                .find_map(|l| l.find(l.place(hash), oldest))
            {
                Some(slot) if slot != head => return false,
                Some(_) => {}
                None => new.push((layer.place(hash), i)),
            }
        }
        // Of the items of one place, the first is new and the others find it.
        new.sort_unstable();
        new.dedup_by_key(|(place, _)| *place);
        let places: Vec<Place> = new.iter().map(|&(place, _)| place).collect();
        for _ in &places {
            self.advance(t);
        }
        let newest = self.layers.len() - 1;
        let stored = self.layers[newest].insert_all(&places);
        let start = results.len();
        results.extend(std::iter::repeat_n(Ok(Added::Present), hashes.len()));
        for &(_, i) in &new {
            results[start + i] = Ok(Added::New);
        }
        // Refused, none is stored: the first new item is where the batch stopped.
        if let (Err(_), Some(first)) = (stored, new.iter().map(|&(_, i)| i).min()) {
            results.truncate(start + first);
            results.push(Err(ChainError::OutOfMemory));
        }
        true
    }

    /// Moves the filter's time to `t` (≥ T): slot counts forward, a few partitions swept,
    /// dead layers whose memory is gone dropped. Dropping a layer may move the newest's index.
    fn advance(&mut self, t: u64) {
        self.time = t;
        let head = t / self.params.slot_ms();
        for layer in &mut self.layers {
            layer.advance(head);
        }
        let last = self.layers.len() - 1;
        let live = |i: usize, l: &Layer| i == last || !l.is_empty();
        // The list shrinks with them, so that the filter takes what a copy loaded from it
        // does (a replica's, a restart's); if the memory for it cannot be had, the empty
        // layers stay until a later write.
        if self.layers.iter().enumerate().any(|(i, l)| !live(i, l)) {
            let _ = self.relist(live, None);
        }
    }

    /// Replaces the layers' list with one allocated to its number: the layers `keep` takes
    /// (by index), then `new`. Refused, it changes nothing.
    fn relist(
        &mut self,
        keep: impl Fn(usize, &Layer) -> bool,
        new: Option<Layer>,
    ) -> Result<(), ChainError> {
        let kept = self.layers.iter().enumerate().filter(|&(i, l)| keep(i, l));
        let mut list = Vec::new();
        list.try_reserve_exact(kept.count() + usize::from(new.is_some()))
            .map_err(|_| ChainError::OutOfMemory)?;
        let old = std::mem::take(&mut self.layers).into_vec();
        list.extend(
            old.into_iter()
                .enumerate()
                .filter(|(i, l)| keep(*i, l))
                .map(|(_, l)| l),
        );
        list.extend(new);
        self.layers = list.into_boxed_slice();
        Ok(())
    }

    /// Adds a layer (at slot `head`) for the adds past the newest one's budget, or refuses
    /// and changes nothing.
    fn scale(&mut self, head: u64, limit: u64) -> Result<(), ChainError> {
        if self.params.expansion == 0 {
            return Err(ChainError::Full);
        }
        if self.layers.len() >= MAX_LAYERS {
            return Err(ChainError::MostSubFilters);
        }
        let spent: f64 = self.live_layers(head).map(|l| l.params().error_rate).sum();
        let rate = WINDOW
            .next_rate(self.params.error_rate, spent)
            .ok_or(ChainError::CannotScale)?;
        let capacity = self.layers[self.layers.len() - 1]
            .params()
            .capacity
            .checked_mul(self.params.expansion as u64)
            .ok_or(ChainError::Overflow)?;
        let lp = self.layer_params(capacity, rate, limit)?;
        let layer = Layer::new(lp, head).ok_or(ChainError::OutOfMemory)?;
        self.relist(|_, _| true, Some(layer))
    }

    /// The parameters of a new layer of `capacity` at `rate`, refused if the filter with it,
    /// full, and its value's box would exceed `limit` bytes (`TooLarge`), or if no layer can
    /// have them (`Overflow`). The limit is asked first, as for filters without a window:
    /// only under a limit raised past any layer's size is a capacity too large to overflow.
    fn layer_params(
        &self,
        capacity: u64,
        rate: f64,
        limit: u64,
    ) -> Result<LayerParams, ChainError> {
        let lp = LayerParams::sized(capacity, rate).ok_or(ChainError::Overflow)?;
        // Only the newest layer takes refreshes, and only while an earlier one exists: the
        // layers there are keep the blocks they hold (even one that has become the first),
        // and a new one after them may come to hold one.
        let refreshed = match self.layers.is_empty() {
            true => 0,
            false => REFRESHED_BYTES,
        };
        let needed = self
            .layers
            .iter()
            .map(|l| {
                l.params()
                    .planned_bytes()
                    .saturating_add(l.refreshed_block_bytes())
            })
            .sum::<u64>()
            .saturating_add(lp.planned_bytes())
            .saturating_add(refreshed)
            .saturating_add(Self::layers_bytes(self.layers.len() + 1))
            .saturating_add(VALUE_BOX_BYTES);
        if needed > limit {
            return Err(ChainError::TooLarge { needed, limit });
        }
        if !lp.buildable() {
            return Err(ChainError::Overflow);
        }
        Ok(lp)
    }

    /// A list of `layers` layers (the box holding the filter is its holder's to count).
    pub(super) fn layers_bytes(layers: usize) -> u64 {
        size_class((layers * std::mem::size_of::<Layer>()) as u64)
    }

    /// Bytes its allocations take, each by its allocator size class.
    pub fn memory_bytes(&self) -> u64 {
        Self::layers_bytes(self.layers.len())
            + self.layers.iter().map(Layer::memory_bytes).sum::<u64>()
    }

    /// Estimated distinct items added within the window ending at `now`.
    pub fn cardinality(&self, now: u64) -> u64 {
        let t = self.at(now);
        let total: f64 = self
            .layers
            .iter()
            .map(|l| l.cardinality(t, self.params.slot_ms()))
            .sum();
        total.round() as u64
    }

    /// Fingerprints held in live generations at `now`: in a filter of one layer at most one
    /// per distinct item; an item re-added after the filter scaled holds one in each layer
    /// it was stored in.
    pub fn stored(&self, now: u64) -> u64 {
        let head = self.at(now) / self.params.slot_ms();
        self.layers.iter().map(|l| l.live_items(head)).sum()
    }

    /// Items per window the filter holds within its rate: the live layers' capacities.
    pub fn capacity(&self, now: u64) -> u64 {
        let head = self.at(now) / self.params.slot_ms();
        self.live_layers(head).map(|l| l.params().capacity).sum()
    }

    /// Layers holding live items at `now`, and the newest in any case: those `capacity`
    /// sums.
    pub fn live_layer_count(&self, now: u64) -> u64 {
        let head = self.at(now) / self.params.slot_ms();
        self.live_layers(head).count() as u64
    }

    /// The layers holding live items at slot `head`, and the newest in any case.
    fn live_layers(&self, head: u64) -> impl Iterator<Item = &Layer> {
        let last = self.layers.len() - 1;
        self.layers
            .iter()
            .enumerate()
            .filter(move |(i, l)| *i == last || l.live_items(head) > 0)
            .map(|(_, l)| l)
    }

    /// Visits its blocks: the layers' list, then each layer's.
    pub fn defrag(&mut self, d: &mut Defrag) {
        d.boxed_slice(&mut self.layers);
        self.layers.iter_mut().for_each(|l| l.defrag(d));
    }

    pub fn try_clone(&self) -> Result<Self, ChainError> {
        let oom = ChainError::OutOfMemory;
        let layers = alloc::try_map(&self.layers, self.layers.len(), oom, |l| {
            l.try_clone().ok_or(oom)
        })?;
        Ok(Self::from_parts(self.params, self.time, layers))
    }
}
