//! The Bloom family as the server sees it: its one registration ([`FAMILY`], listed in lib.rs)
//! and its command table (handler, flags, key specs, `COMMAND DOCS` and arity per command;
//! see `server/command_table.rs` for what each row declares). `@bloom` is RedisBloom's ACL
//! category name, so ACL rules written for RedisBloom keep their meaning.

use super::commands as bf;
use super::datatype::BLOOM_TYPE;
use super::redisbloom::datatype::RB_TYPE;
use super::{config, stats};
use crate::server::command_table::{
    arg, double, integer, key, key_at, string, token, Arg, ArgKind, CommandInfo, ADD, CREATE, READ,
    RESTORE,
};
use crate::server::ffi::callback;
use crate::server::module::Family;
use std::ffi::CStr;

pub static FAMILY: Family = Family {
    types: &[&BLOOM_TYPE, &RB_TYPE],
    commands: COMMANDS,
    category: c"bloom",
    configs: config::CONFIGS,
    ignored_arguments: config::IGNORED_ARGUMENTS,
    info: stats::INFO,
};

/// `[LAYOUT standard|blocked]` of the commands that create filters.
const LAYOUT: Arg = arg(
    c"layout",
    ArgKind::OneOf(&[
        token(c"standard", c"STANDARD"),
        token(c"blocked", c"BLOCKED"),
    ]),
)
.after(c"LAYOUT")
.optional();
/// `[SEED seed]`: a new filter's hash seed (`commands.rs`).
const SEED: Arg = integer(c"seed").after(c"SEED").optional();
/// `[WINDOW seconds]`: a windowed filter (`window/`).
const WINDOW: Arg = integer(c"seconds").after(c"WINDOW").optional();
const ONE_ITEM: &[Arg] = &[key(c"key", 0), string(c"item")];
const ITEMS: &[Arg] = &[key(c"key", 0), string(c"item").multiple()];
const ONE_ITEM_COST: &CStr = c"O(k * s), k = hash functions, s = sub-filters";
const PER_ITEM_COST: &CStr = c"O(k * s) per item, k = hash functions, s = sub-filters";

pub static COMMANDS: &[CommandInfo] = &[
    CommandInfo::new(
        c"bf.reserve",
        callback!(bf::reserve),
        "write deny-oom",
        &[key_at(1, CREATE)],
        &[
            key(c"key", 0),
            double(c"error_rate"),
            integer(c"capacity"),
            integer(c"expansion").after(c"EXPANSION").optional(),
            token(c"nonscaling", c"NONSCALING").optional(),
            LAYOUT,
            SEED,
            WINDOW,
        ],
    )
    .docs(
        c"Creates an empty Bloom filter for a capacity and a false-positive rate",
        c"O(n), n = the filter's size (zeroed pages)",
    ),
    CommandInfo::new(
        c"bf.add",
        callback!(bf::add),
        "write deny-oom fast",
        &[key_at(1, ADD)],
        ONE_ITEM,
    )
    .docs(
        c"Adds an item to a Bloom filter, creating the filter if needed",
        ONE_ITEM_COST,
    ),
    CommandInfo::new(
        c"bf.madd",
        callback!(bf::madd),
        "write deny-oom",
        &[key_at(1, ADD)],
        ITEMS,
    )
    .docs(
        c"Adds items to a Bloom filter, creating the filter if needed",
        PER_ITEM_COST,
    ),
    CommandInfo::new(
        c"bf.insert",
        callback!(bf::insert),
        "write deny-oom",
        &[key_at(1, ADD)],
        &[
            key(c"key", 0),
            integer(c"capacity").after(c"CAPACITY").optional(),
            double(c"error").after(c"ERROR").optional(),
            integer(c"expansion").after(c"EXPANSION").optional(),
            token(c"nocreate", c"NOCREATE").optional(),
            token(c"nonscaling", c"NONSCALING").optional(),
            LAYOUT,
            SEED,
            WINDOW,
            integer(c"unix-time-milliseconds").after(c"AT").optional(),
            string(c"item").after(c"ITEMS").multiple(),
        ],
    )
    .docs(
        c"Adds items to a Bloom filter, creating it with the given options if needed",
        PER_ITEM_COST,
    ),
    CommandInfo::new(
        c"bf.exists",
        callback!(bf::exists),
        "readonly fast",
        &[key_at(1, READ)],
        ONE_ITEM,
    )
    .docs(
        c"Tells whether an item was (probably) added to a Bloom filter",
        ONE_ITEM_COST,
    ),
    CommandInfo::new(
        c"bf.mexists",
        callback!(bf::mexists),
        "readonly",
        &[key_at(1, READ)],
        ITEMS,
    )
    .docs(
        c"Tells for each item whether it was (probably) added to a Bloom filter",
        PER_ITEM_COST,
    ),
    CommandInfo::new(
        c"bf.info",
        callback!(bf::info),
        "readonly fast",
        &[key_at(1, READ)],
        &[
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
                    token(c"blocked", c"BLOCKED"),
                    token(c"window", c"WINDOW"),
                    token(c"stored", c"STORED"),
                    token(c"time", c"TIME"),
                ]),
            )
            .optional(),
        ],
    )
    .docs(
        c"Returns the capacity, size, sub-filters, items and expansion of a Bloom filter",
        c"O(1)",
    ),
    CommandInfo::new(
        c"bf.card",
        callback!(bf::card),
        "readonly fast",
        &[key_at(1, READ)],
        &[key(c"key", 0)],
    )
    .docs(
        c"Returns the number of items added to a Bloom filter",
        c"O(1)",
    ),
    CommandInfo::new(
        c"bf.scandump",
        callback!(bf::scandump),
        "readonly",
        &[key_at(1, READ)],
        &[key(c"key", 0), integer(c"iterator")],
    )
    .docs(
        c"Returns the next chunk of a Bloom filter's serialized form (for BF.LOADCHUNK)",
        c"O(n), n = the chunk's size (at most 16 MiB)",
    ),
    CommandInfo::new(
        c"bf.loadchunk",
        callback!(bf::loadchunk),
        "write deny-oom",
        &[key_at(1, RESTORE)],
        &[key(c"key", 0), integer(c"iterator"), string(c"data")],
    )
    .docs(
        c"Restores a Bloom filter from the replies of BF.SCANDUMP, chunk by chunk",
        c"O(n), n = the chunk's size",
    ),
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
