//! The linear counter family as the server sees it: its one registration ([`FAMILY`], listed
//! in lib.rs) and its command table (see `server/command_table.rs` for what each row
//! declares). Its commands join the ACL category `@lc`.

use super::commands as lc;
use super::datatype::LC_TYPE;
use super::{config, stats};
use crate::server::command_table::{
    arg, double, integer, key, key_at, keys_from, string, token, ArgKind, CommandInfo, ADD, CREATE,
    READ, RESTORE,
};
use crate::server::ffi::callback;
use crate::server::module::Family;
use std::ffi::CStr;

pub static FAMILY: Family = Family {
    types: &[&LC_TYPE],
    commands: COMMANDS,
    category: c"lc",
    configs: config::CONFIGS,
    ignored_arguments: &[],
    info: stats::INFO,
};

/// `LC.ADD`'s and `LC.INSERT`'s: a batch the exact set holds whatever its items goes in at once.
const ADD_COST: &CStr = c"O(1) per item in registers mode, O(s) per item in exact and tokens mode (s <= 8192 fingerprints or 4 KiB of tokens), O(s + n log n) for n items an exact counter holds whatever they are";

pub static COMMANDS: &[CommandInfo] = &[
    CommandInfo::new(c"lc.reserve", callback!(lc::reserve), "write deny-oom fast", &[key_at(1, CREATE)], &[key(c"key", 0), double(c"error_rate"), integer(c"capacity")])
.docs(c"Creates an empty linear counter for a capacity and a standard error", c"O(1): nothing is allocated before the first item"),
    CommandInfo::new(c"lc.add", callback!(lc::add), "write deny-oom", &[key_at(1, ADD)], &[key(c"key", 0), string(c"item").optional().multiple()])
.docs(c"Adds items to a linear counter, creating the counter if needed", ADD_COST),
    CommandInfo::new(c"lc.insert", callback!(lc::insert), "write deny-oom", &[key_at(1, ADD)], &[
            key(c"key", 0),
            integer(c"capacity").after(c"CAPACITY").optional(),
            double(c"error_rate").after(c"ERROR").optional(),
            token(c"nocreate", c"NOCREATE").optional(),
            string(c"item").after(c"ITEMS").multiple(),
        ])
.docs(c"Adds items to a linear counter, creating it with the given capacity and standard error if needed", ADD_COST),
    CommandInfo::new(c"lc.count", callback!(lc::count), "readonly", &[keys_from(1, READ)], &[key(c"key", 0).multiple()])
.docs(c"Estimates the number of distinct items in the union of linear counters", c"O(1) for one key, O(n) for several, n = their total size"),
    CommandInfo::new(c"lc.merge", callback!(lc::merge), "write deny-oom", &[
            // The destination's content is combined with the sources', as PFMERGE's.
            key_at(1, ADD),
            keys_from(2, READ),
        ], &[key(c"destkey", 0), key(c"sourcekey", 1).multiple()])
.docs(c"Merges linear counters into a destination counter", c"O(n), n = the total size of the counters; O(n log n) when all are exact counters of one size listing at most 2^24 fingerprints"),
    CommandInfo::new(c"lc.info", callback!(lc::info), "readonly fast", &[key_at(1, READ)], &[key(c"key", 0)])
.docs(c"Returns the geometry, mode, count and standard error of a linear counter", c"O(1)"),
    CommandInfo::new(c"lc.loadchunk", callback!(lc::loadchunk), "write deny-oom", &[key_at(1, RESTORE)], &[
            key(c"key", 0),
            arg(
                c"form",
                ArgKind::OneOf(&[
                    string(c"payload"),
                    arg(
                        c"chunk",
                        ArgKind::Block(&[integer(c"iterator"), string(c"piece")]),
                    ),
                ]),
            ),
        ])
.docs(c"Recreates a linear counter from its serialized form, whole or in pieces (AOF rewrite)", c"O(n), n = the payload's size"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::command_table::{check_family_table, row};

    #[test]
    fn the_table_is_what_redis_accepts_with_these_arities() {
        let expected = [
            ("lc.reserve", 4),
            ("lc.add", -2),
            ("lc.insert", -4),
            ("lc.count", -2),
            ("lc.merge", -3),
            ("lc.info", 2),
            ("lc.loadchunk", -3),
        ];
        check_family_table(COMMANDS, "lc.", &expected);
        assert_eq!(row(COMMANDS, "lc.count").legacy_keys(), (1, -1, 1));
        assert_eq!(row(COMMANDS, "lc.merge").legacy_keys(), (1, -1, 1));
        assert_eq!(
            row(COMMANDS, "lc.info").acl_categories(Some("lc")),
            "read fast lc"
        );
    }
}
