//! The linear counter family as the server sees it: its one registration ([`FAMILY`], listed
//! in lib.rs) and its command table (see `server/command_table.rs` for what each row
//! declares). Its commands join the ACL category `@lc`.

use super::commands as lc;
use super::datatype::LC_TYPE;
use super::{config, stats};
use crate::server::command_table::{
    arg, double, integer, key, key_at, keys_from, string, ArgKind, CommandInfo, ADD, CREATE, READ,
    RESTORE,
};
use crate::server::ffi::callback;
use crate::server::module::Family;
use std::ffi::CStr;

/// The module version the commands first appeared in.
const SINCE: &CStr = c"0.1.0";

pub static FAMILY: Family = Family {
    types: &[&LC_TYPE],
    commands: COMMANDS,
    category: c"lc",
    configs: config::CONFIGS,
    ignored_arguments: &[],
    info: stats::INFO,
};

pub static COMMANDS: &[CommandInfo] = &[
    CommandInfo {
        name: c"lc.reserve",
        callback: callback!(lc::reserve),
        flags: "write deny-oom fast",
        summary: c"Creates an empty linear counter for a capacity and a standard error",
        since: SINCE,
        complexity: c"O(1): nothing is allocated before the first item",
        keys: &[key_at(1, CREATE)],
        args: &[key(c"key", 0), double(c"error_rate"), integer(c"capacity")],
    },
    CommandInfo {
        name: c"lc.add",
        callback: callback!(lc::add),
        flags: "write deny-oom",
        summary: c"Adds items to a linear counter, creating the counter if needed",
        since: SINCE,
        complexity: c"O(1) per item in registers mode, O(s) per item in exact and tokens mode (s <= 8192 fingerprints or 4 KiB of tokens)",
        keys: &[key_at(1, ADD)],
        args: &[key(c"key", 0), string(c"item").optional().multiple()],
    },
    CommandInfo {
        name: c"lc.count",
        callback: callback!(lc::count),
        flags: "readonly",
        summary: c"Estimates the number of distinct items in the union of linear counters",
        since: SINCE,
        complexity: c"O(1) for one key, O(n) for several, n = their total size",
        keys: &[keys_from(1, READ)],
        args: &[key(c"key", 0).multiple()],
    },
    CommandInfo {
        name: c"lc.merge",
        callback: callback!(lc::merge),
        flags: "write deny-oom",
        summary: c"Merges linear counters into a destination counter",
        since: SINCE,
        complexity: c"O(n), n = the total size of the counters",
        keys: &[
            // The destination's content is combined with the sources', as PFMERGE's.
            key_at(1, ADD),
            keys_from(2, READ),
        ],
        args: &[key(c"destkey", 0), key(c"sourcekey", 1).multiple()],
    },
    CommandInfo {
        name: c"lc.info",
        callback: callback!(lc::info),
        flags: "readonly fast",
        summary: c"Returns the geometry, mode, count and standard error of a linear counter",
        since: SINCE,
        complexity: c"O(1)",
        keys: &[key_at(1, READ)],
        args: &[key(c"key", 0)],
    },
    CommandInfo {
        name: c"lc.loadchunk",
        callback: callback!(lc::loadchunk),
        flags: "write deny-oom",
        summary:
            c"Recreates a linear counter from its serialized form, whole or in pieces (AOF rewrite)",
        since: SINCE,
        complexity: c"O(n), n = the payload's size",
        keys: &[key_at(1, RESTORE)],
        args: &[
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
        ],
    },
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
