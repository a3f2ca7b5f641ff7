//! The pure RedisBloom core (`lcbloom::bloom::redisbloom`) against real RedisBloom 2.8.2: filters made
//! by RedisBloom at test time decode to chains that answer, report and grow exactly as
//! RedisBloom does, and legacy payloads built from the spec's layouts (encvers 0–3) load
//! into both identically. No lcbloom module is involved here (see rb_import.rs for that).

use crate::common::redisbloom::{self as rb, Sample};
use lcbloom::bloom::redisbloom::chain::RedisBloomChain;
use lcbloom::bloom::redisbloom::dump::{decode_value, encode_value};
use lcbloom::bloom::redisbloom::scandump;
use redis::{Connection, Value};

fn core_answers(chain: &RedisBloomChain, items: &[Vec<u8>]) -> Vec<i64> {
    items
        .iter()
        .map(|i| chain.contains(&chain.hash(i)) as i64)
        .collect()
}

fn info_of(chain: &RedisBloomChain) -> Vec<Value> {
    let int = |v: u64| Value::Int(v as i64);
    let field = |s: &str| Value::SimpleString(s.to_string());
    vec![
        field("Capacity"),
        int(chain.capacity()),
        field("Size"),
        int(chain.redisbloom_size()),
        field("Number of filters"),
        int(chain.links().len() as u64),
        field("Number of items inserted"),
        int(chain.size()),
        field("Expansion rate"),
        chain.expansion().map_or(Value::Nil, |g| int(g as u64)),
    ]
}

/// Every answer of RedisBloom for `key` against the decoded chain: members and non-members,
/// BF.INFO, BF.CARD, BF.SCANDUMP. Returns the number of differing membership answers.
fn compare(c: &mut Connection, key: &str, chain: &RedisBloomChain, items: &[Vec<u8>]) -> usize {
    let server = rb::mexists(c, key, items);
    let core = core_answers(chain, items);
    let info = rb::info(c, key);
    assert_eq!(info, Value::Array(info_of(chain)), "{key}: BF.INFO");
    let card: u64 = redis::cmd("BF.CARD").arg(key).query(c).unwrap();
    assert_eq!(card, chain.size(), "{key}: BF.CARD");
    let mut parts = vec![(1i64, scandump::encode_header(chain))];
    let mut it = 1;
    while let Some((next, data)) = scandump::chunk(chain, it) {
        parts.push((next as i64, data.to_vec()));
        it = next;
    }
    assert!(rb::scandump(c, key) == parts, "{key}: BF.SCANDUMP");
    server.iter().zip(&core).filter(|(a, b)| a != b).count()
}

/// Adds the same items on both sides, requiring the same replies, then checks that
/// RedisBloom's value decodes to exactly the core's chain (every bit and counter).
fn grow_both(c: &mut Connection, key: &str, chain: &mut RedisBloomChain, items: &[Vec<u8>]) {
    for item in items {
        let server: redis::RedisResult<i64> = redis::cmd("BF.ADD").arg(key).arg(item).query(c);
        let core = chain.add(&chain.hash(item), u64::MAX);
        match (server, core) {
            (Ok(s), Ok(k)) => assert_eq!(s, k as i64, "{key}: BF.ADD"),
            (Err(s), Err(k)) => {
                assert_eq!(s.detail().unwrap_or(""), k.to_string())
            }
            (s, k) => panic!("{key}: RedisBloom {s:?}, core {k:?}"),
        }
    }
    let value = rb::dump_value(c, key);
    assert!(
        decode_value(&value, u64::MAX).unwrap() == *chain,
        "{key}: value after adds"
    );
}

#[test]
fn redisbloom_filters_decode_and_answer_identically() {
    let Some(module) = rb::module() else { return };
    let server = rb::server(&module);
    let mut c = server.conn();
    let samples: Vec<Sample> = rb::create_samples(&mut c);
    let non_members = rb::non_members(20_000);
    for s in &samples {
        let value = rb::dump_value(&mut c, &s.key);
        let mut chain = decode_value(&value, u64::MAX).unwrap();
        assert!(decode_value(&encode_value(&chain), u64::MAX).unwrap() == chain);
        let items: Vec<Vec<u8>> = s.members.iter().chain(&non_members).cloned().collect();
        assert_eq!(compare(&mut c, &s.key, &chain, &items), 0, "{}", s.key);
        let more = rb::further_items(&s.key);
        grow_both(&mut c, &s.key, &mut chain, &more);
        let items: Vec<Vec<u8>> = items.into_iter().chain(more).collect();
        assert_eq!(
            compare(&mut c, &s.key, &chain, &items),
            0,
            "{} after adds",
            s.key
        );
        println!(
            "{}: {} links, {} items, 0 differing answers",
            s.key,
            chain.links().len(),
            chain.size()
        );
    }
    assert!(samples.iter().any(|s| s.key == "rb:exp1"));
}

#[test]
fn legacy_encvers_load_into_redisbloom_as_into_the_core() {
    let Some(module) = rb::module() else { return };
    let server = rb::server(&module);
    let mut c = server.conn();
    let non_members = rb::non_members(20_000);
    for (sample, value) in rb::legacy_samples() {
        let key = sample.key;
        rb::restore_value(&mut c, &key, &value);
        let mut chain = decode_value(&value, u64::MAX).unwrap();
        let items: Vec<Vec<u8>> = sample.members.iter().chain(&non_members).cloned().collect();
        assert_eq!(compare(&mut c, &key, &chain, &items), 0, "{key}");
        let more = rb::further_items(&key);
        grow_both(&mut c, &key, &mut chain, &more);
        let items: Vec<Vec<u8>> = items.into_iter().chain(more).collect();
        assert_eq!(compare(&mut c, &key, &chain, &items), 0, "{key} after adds");
        println!("{key}: {} links, 0 differing answers", chain.links().len());
    }
}
