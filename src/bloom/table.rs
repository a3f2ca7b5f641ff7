//! The Bloom family as the server sees it: its one registration ([`FAMILY`], listed in lib.rs)
//! and its command table (handler, flags, key specs, `COMMAND DOCS` and arity per command;
//! see `server/command_table.rs` for what each row declares). `@bloom` is RedisBloom's ACL
//! category name, so ACL rules written for RedisBloom keep their meaning.

use super::commands as bf;
use super::datatype::BLOOM_TYPE;
use super::redisbloom::datatype::RB_TYPE;
use super::{config, stats};
use crate::server::command_table::{
    arg, double, integer, key, key_at, string, token, ArgKind, CommandInfo, ADD, CREATE, READ,
    RESTORE,
};
use crate::server::ffi::callback;
use crate::server::module::Family;
use std::ffi::CStr;

/// The module version the commands first appeared in.
const SINCE: &CStr = c"0.1.0";

pub static FAMILY: Family = Family {
    types: &[&BLOOM_TYPE, &RB_TYPE],
    commands: COMMANDS,
    category: c"bloom",
    configs: config::CONFIGS,
    ignored_arguments: config::IGNORED_ARGUMENTS,
    info: stats::INFO,
};

pub static COMMANDS: &[CommandInfo] = &[
    CommandInfo {
        name: c"bf.reserve",
        callback: callback!(bf::reserve),
        flags: "write deny-oom",
        summary: c"Creates an empty Bloom filter for a capacity and a false-positive rate",
        since: SINCE,
        complexity: c"O(n), n = the filter's size (zeroed pages)",
        keys: &[key_at(1, CREATE)],
        args: &[
            key(c"key", 0),
            double(c"error_rate"),
            integer(c"capacity"),
            integer(c"expansion").after(c"EXPANSION").optional(),
            token(c"nonscaling", c"NONSCALING").optional(),
            arg(
                c"layout",
                ArgKind::OneOf(&[
                    token(c"standard", c"STANDARD"),
                    token(c"blocked", c"BLOCKED"),
                ]),
            )
            .after(c"LAYOUT")
            .optional(),
        ],
    },
    CommandInfo {
        name: c"bf.add",
        callback: callback!(bf::add),
        flags: "write deny-oom fast",
        summary: c"Adds an item to a Bloom filter, creating the filter if needed",
        since: SINCE,
        complexity: c"O(k * s), k = hash functions, s = sub-filters",
        keys: &[key_at(1, ADD)],
        args: &[key(c"key", 0), string(c"item")],
    },
    CommandInfo {
        name: c"bf.madd",
        callback: callback!(bf::madd),
        flags: "write deny-oom",
        summary: c"Adds items to a Bloom filter, creating the filter if needed",
        since: SINCE,
        complexity: c"O(k * s) per item, k = hash functions, s = sub-filters",
        keys: &[key_at(1, ADD)],
        args: &[key(c"key", 0), string(c"item").multiple()],
    },
    CommandInfo {
        name: c"bf.insert",
        callback: callback!(bf::insert),
        flags: "write deny-oom",
        summary: c"Adds items to a Bloom filter, creating it with the given options if needed",
        since: SINCE,
        complexity: c"O(k * s) per item, k = hash functions, s = sub-filters",
        keys: &[key_at(1, ADD)],
        args: &[
            key(c"key", 0),
            integer(c"capacity").after(c"CAPACITY").optional(),
            double(c"error").after(c"ERROR").optional(),
            integer(c"expansion").after(c"EXPANSION").optional(),
            token(c"nocreate", c"NOCREATE").optional(),
            token(c"nonscaling", c"NONSCALING").optional(),
            arg(
                c"layout",
                ArgKind::OneOf(&[
                    token(c"standard", c"STANDARD"),
                    token(c"blocked", c"BLOCKED"),
                ]),
            )
            .after(c"LAYOUT")
            .optional(),
            string(c"item").after(c"ITEMS").multiple(),
        ],
    },
    CommandInfo {
        name: c"bf.exists",
        callback: callback!(bf::exists),
        flags: "readonly fast",
        summary: c"Tells whether an item was (probably) added to a Bloom filter",
        since: SINCE,
        complexity: c"O(k * s), k = hash functions, s = sub-filters",
        keys: &[key_at(1, READ)],
        args: &[key(c"key", 0), string(c"item")],
    },
    CommandInfo {
        name: c"bf.mexists",
        callback: callback!(bf::mexists),
        flags: "readonly",
        summary: c"Tells for each item whether it was (probably) added to a Bloom filter",
        since: SINCE,
        complexity: c"O(k * s) per item, k = hash functions, s = sub-filters",
        keys: &[key_at(1, READ)],
        args: &[key(c"key", 0), string(c"item").multiple()],
    },
    CommandInfo {
        name: c"bf.info",
        callback: callback!(bf::info),
        flags: "readonly fast",
        summary: c"Returns the capacity, size, sub-filters, items and expansion of a Bloom filter",
        since: SINCE,
        complexity: c"O(1)",
        keys: &[key_at(1, READ)],
        args: &[
            key(c"key", 0),
            arg(
                c"field",
                ArgKind::OneOf(&[
                    token(c"capacity", c"CAPACITY"),
                    token(c"size", c"SIZE"),
                    token(c"filters", c"FILTERS"),
                    token(c"items", c"ITEMS"),
                    token(c"expansion", c"EXPANSION"),
                    token(c"layout", c"LAYOUT"),
                ]),
            )
            .optional(),
        ],
    },
    CommandInfo {
        name: c"bf.card",
        callback: callback!(bf::card),
        flags: "readonly fast",
        summary: c"Returns the number of items added to a Bloom filter",
        since: SINCE,
        complexity: c"O(1)",
        keys: &[key_at(1, READ)],
        args: &[key(c"key", 0)],
    },
    CommandInfo {
        name: c"bf.scandump",
        callback: callback!(bf::scandump),
        flags: "readonly",
        summary: c"Returns the next chunk of a Bloom filter's serialized form (for BF.LOADCHUNK)",
        since: SINCE,
        complexity: c"O(n), n = the chunk's size (at most 16 MiB)",
        keys: &[key_at(1, READ)],
        args: &[key(c"key", 0), integer(c"iterator")],
    },
    CommandInfo {
        name: c"bf.loadchunk",
        callback: callback!(bf::loadchunk),
        flags: "write deny-oom",
        summary: c"Restores a Bloom filter from the replies of BF.SCANDUMP, chunk by chunk",
        since: SINCE,
        complexity: c"O(n), n = the chunk's size",
        keys: &[key_at(1, RESTORE)],
        args: &[key(c"key", 0), integer(c"iterator"), string(c"data")],
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::command_table::{check_family_table, row};

    #[test]
    fn the_table_is_what_redis_accepts_with_these_arities() {
        let expected = [
            ("bf.reserve", -4),
            ("bf.add", 3),
            ("bf.madd", -3),
            ("bf.insert", -4),
            ("bf.exists", 3),
            ("bf.mexists", -3),
            ("bf.info", -2),
            ("bf.card", 2),
            ("bf.scandump", 3),
            ("bf.loadchunk", 4),
        ];
        check_family_table(COMMANDS, "bf.", &expected);
        assert_eq!(row(COMMANDS, "bf.add").legacy_keys(), (1, 1, 1));
        assert_eq!(
            row(COMMANDS, "bf.mexists").acl_categories(Some("bloom")),
            "read slow bloom"
        );
    }
}
