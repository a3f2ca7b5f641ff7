//! The command table: the row type every family fills for each of its commands (its handler
//! and what it declares to the server), and the calls that register the rows. Adding a command
//! means adding a row to its family's table (`<family>/table.rs`).
//!
//! * **Key specs**: which arguments are keys and what the command does to each. ACL key
//!   permissions follow the logical flags: `ACCESS` needs read permission (`%R~`), `INSERT`,
//!   `UPDATE` and `DELETE` need write permission (`%W~`); a key declared only through
//!   `RedisModule_CreateCommand`'s (first, last, step) becomes "RW ACCESS UPDATE", which would
//!   refuse a read-only user even `BF.EXISTS`. Cluster routing, `COMMAND GETKEYS` and
//!   `GETKEYSANDFLAGS` use the specs too. The adders carry `ACCESS` because their reply tells
//!   whether an item was already there (a membership test), so a write-only key permission
//!   is not enough for them.
//! * **`COMMAND DOCS`**: summary, since, complexity and arguments, which redis-cli shows as
//!   hints. The arity Redis enforces before a call reaches the module is derived from the
//!   arguments. docs/commands.md says the same in prose (a test keeps the two in step).
//! * **ACL categories**: `@read` or `@write` from the command flags, `@fast` or `@slow`, and
//!   the category of the command's family (`@bloom` for `BF.*`, as RedisBloom, `@lc` for
//!   `LC.*`), which the family's descriptor names.
//!
//! [`register`] runs in `OnLoad`: it creates every command (`RedisModule_CreateCommand`, with
//! the flags and, for servers without key specs, the key range glued from the specs), then
//! declares the rest once all exist. `RedisModule_SetCommandInfo`
//! (Redis 7.0+, Valkey) deep-copies what it is given (strings with `zstrdup`, arrays walked
//! with the element sizes of `INFO_VERSION`), so the raw structs built here live only for
//! the call. `RedisModule_SetCommandACLCategories` exists from Redis 7.2 and Valkey 8, and
//! `RedisModule_AddACLCategory` from Redis 7.4 and Valkey 8: each is used only when the server
//! has it, so the module loads on 7.0 (the README gives 7.0's `ACL SETUSER` lines instead).

use crate::server::ffi;
use redis_module::{raw, Context, Status};
use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

/// One command. `name` is the lower-case name it is registered under.
pub struct CommandInfo {
    pub name: &'static CStr,
    /// The C callback around the handler, made by `callback!`.
    pub callback: raw::RedisModuleCmdFunc,
    /// The flags given to `RedisModule_CreateCommand` ("write deny-oom fast" ...).
    pub flags: &'static str,
    pub summary: &'static CStr,
    pub since: &'static CStr,
    pub complexity: &'static CStr,
    pub keys: &'static [KeySpec],
    pub args: &'static [Arg],
}

/// Keys found at `index` and after it up to `last` (relative to `index`; -1 = the last
/// argument), every `step` arguments. `flags` are `REDISMODULE_CMD_KEY_*` bits.
#[derive(Clone, Copy)]
pub struct KeySpec {
    pub flags: u32,
    pub index: i32,
    pub last: i32,
    pub step: i32,
}

/// Readers: the value is read and its content (or facts about it) returned.
pub const READ: u32 = raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS;
/// Adders whose reply reveals whether the items were there: read and insert.
pub const ADD: u32 =
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_INSERT;
/// Creating a value on a missing key (refused on an existing one), as `SETNX`.
pub const CREATE: u32 = raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_INSERT;
/// Restoring serialized bytes into a value (a chunk overwrites part of an existing one).
pub const RESTORE: u32 = raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE;

/// The key at `index`.
pub const fn key_at(index: i32, flags: u32) -> KeySpec {
    KeySpec {
        flags,
        index,
        last: 0,
        step: 1,
    }
}

/// Every argument from `index` to the last.
pub const fn keys_from(index: i32, flags: u32) -> KeySpec {
    KeySpec {
        flags,
        index,
        last: -1,
        step: 1,
    }
}

/// One argument of the syntax, as `COMMAND DOCS` describes it.
pub struct Arg {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword before the value (`EXPANSION 4`), or the whole argument for `Token`.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    pub multiple: bool,
}

pub enum ArgKind {
    /// A key name, described by the key spec with this index.
    Key(usize),
    String,
    Integer,
    Double,
    /// A keyword alone (`NONSCALING`).
    Token,
    /// Exactly one of the sub-arguments.
    OneOf(&'static [Arg]),
    /// The sub-arguments in sequence.
    Block(&'static [Arg]),
}

pub const fn arg(name: &'static CStr, kind: ArgKind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
    }
}

pub const fn key(name: &'static CStr, spec: usize) -> Arg {
    arg(name, ArgKind::Key(spec))
}

pub const fn string(name: &'static CStr) -> Arg {
    arg(name, ArgKind::String)
}

pub const fn integer(name: &'static CStr) -> Arg {
    arg(name, ArgKind::Integer)
}

pub const fn double(name: &'static CStr) -> Arg {
    arg(name, ArgKind::Double)
}

/// A keyword alone; `name` is how `COMMAND DOCS` names it.
pub const fn token(name: &'static CStr, keyword: &'static CStr) -> Arg {
    arg(name, ArgKind::Token).after(keyword)
}

impl Arg {
    pub const fn after(mut self, keyword: &'static CStr) -> Arg {
        self.token = Some(keyword);
        self
    }

    pub const fn optional(mut self) -> Arg {
        self.optional = true;
        self
    }

    pub const fn multiple(mut self) -> Arg {
        self.multiple = true;
        self
    }

    /// (fewest words this argument takes, whether it can take more).
    fn words(&self) -> (i32, bool) {
        let keyword = i32::from(self.token.is_some() && !matches!(self.kind, ArgKind::Token));
        let (min, variable) = match self.kind {
            ArgKind::OneOf(choices) => {
                let shapes: Vec<(i32, bool)> = choices.iter().map(Arg::words).collect();
                let min = shapes.iter().map(|s| s.0).min().unwrap_or(0);
                let max = shapes.iter().map(|s| s.0).max().unwrap_or(0);
                (min, min != max || shapes.iter().any(|s| s.1))
            }
            ArgKind::Block(parts) => parts
                .iter()
                .map(Arg::words)
                .fold((0, false), |a, s| (a.0 + s.0, a.1 || s.1)),
            _ => (1, false),
        };
        if self.optional {
            (0, true)
        } else {
            (keyword + min, variable || self.multiple)
        }
    }
}

/// The module version every command first appeared in.
const FIRST_VERSION: &CStr = c"0.1.0";

impl CommandInfo {
    /// The row of command `name`: its handler, flags, keys and arguments. `docs` adds
    /// what `COMMAND DOCS` says of it.
    pub const fn new(
        name: &'static CStr,
        callback: raw::RedisModuleCmdFunc,
        flags: &'static str,
        keys: &'static [KeySpec],
        args: &'static [Arg],
    ) -> CommandInfo {
        CommandInfo {
            name,
            callback,
            flags,
            summary: c"",
            since: FIRST_VERSION,
            complexity: c"",
            keys,
            args,
        }
    }

    pub const fn docs(mut self, summary: &'static CStr, complexity: &'static CStr) -> CommandInfo {
        self.summary = summary;
        self.complexity = complexity;
        self
    }

    /// The arity Redis checks before calling the handler: N words exactly, or -N for at
    /// least N (the command name counts).
    pub fn arity(&self) -> i32 {
        let (min, variable) = self
            .args
            .iter()
            .map(Arg::words)
            .fold((1, false), |a, s| (a.0 + s.0, a.1 || s.1));
        if variable {
            -min
        } else {
            min
        }
    }

    /// The (first, last, step) triple for `RedisModule_CreateCommand`, which servers without
    /// key specs use: the specs glued into one range (ours are contiguous, step 1).
    pub fn legacy_keys(&self) -> (c_int, c_int, c_int) {
        let (Some(first), Some(last)) = (self.keys.first(), self.keys.last()) else {
            return (0, 0, 0);
        };
        let end = if last.last < 0 {
            last.last
        } else {
            last.index + last.last
        };
        (first.index, end, first.step)
    }

    /// The ACL categories, space separated: from the flags, plus the family's category when
    /// the server knows it.
    pub fn acl_categories(&self, family: Option<&str>) -> String {
        let has = |flag: &str| self.flags.split_whitespace().any(|f| f == flag);
        let mut categories = vec![
            if has("write") { "write" } else { "read" },
            if has("fast") { "fast" } else { "slow" },
        ];
        categories.extend(family);
        categories.join(" ")
    }
}

/// Redis walks our arrays with these element sizes (they grow in newer headers; older
/// servers read the fields they know and skip the rest).
static INFO_VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
    version: 1,
    sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
    sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
    sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
};

/// A family's commands and the ACL category they join.
pub struct Table {
    pub category: &'static CStr,
    pub commands: &'static [CommandInfo],
}

/// Creates every command of `tables`, then declares their key specs, docs and ACL categories;
/// called from `OnLoad`.
pub fn register(ctx: &Context, tables: &[Table]) -> Status {
    for info in tables.iter().flat_map(|t| t.commands) {
        let keys = info.legacy_keys();
        if ffi::create_command(ctx, info.name, info.callback, info.flags, keys) == Status::Err {
            ctx.log_warning(&format!("lcbloom: cannot create {:?}", info.name));
            return Status::Err;
        }
    }
    declare(ctx, tables)
}

/// Declares key specs, docs and ACL categories of every command. Fails the load only on what
/// the server refuses although it supports it (a broken table); on a server without an API it
/// logs and goes on.
fn declare(ctx: &Context, tables: &[Table]) -> Status {
    // SAFETY: plain reads of function pointers Redis sets before OnLoad.
    let (get, set_info, set_categories, add_category) = unsafe {
        (
            raw::RedisModule_GetCommand,
            raw::RedisModule_SetCommandInfo,
            raw::RedisModule_SetCommandACLCategories,
            raw::RedisModule_AddACLCategory,
        )
    };
    let (Some(get), Some(set_info)) = (get, set_info) else {
        ctx.log_notice("lcbloom: this server has no command info API (Redis 7.0+): no key specs or COMMAND DOCS");
        return Status::Ok;
    };
    let with_family = match (set_categories, add_category) {
        (None, _) => {
            ctx.log_notice("lcbloom: ACL categories need Redis 7.2+ or Valkey 8+; see the README's Access control for this server's ACL SETUSER lines");
            false
        }
        (Some(_), None) => {
            ctx.log_notice(
                "lcbloom: this server cannot add ACL categories: no family categories (@bloom, @lc ...)",
            );
            false
        }
        (Some(_), Some(add)) => tables.iter().all(|table| {
            // SAFETY: OnLoad's context and a NUL-terminated name. EBUSY: the category is
            // already there (the module was loaded before, or RedisBloom added @bloom).
            let added =
                unsafe { add(ctx.ctx, table.category.as_ptr()) } == raw::Status::Ok as c_int;
            added || std::io::Error::last_os_error().raw_os_error() == Some(EBUSY)
        }),
    };
    for table in tables {
        let category = table.category.to_str().ok().filter(|_| with_family);
        for info in table.commands {
            if declare_command(ctx, get, set_info, set_categories, info, category) == Status::Err {
                return Status::Err;
            }
        }
    }
    Status::Ok
}

type GetCommand =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, *const c_char) -> *mut raw::RedisModuleCommand;
type SetInfo =
    unsafe extern "C" fn(*mut raw::RedisModuleCommand, *const raw::RedisModuleCommandInfo) -> c_int;
type SetCategories = unsafe extern "C" fn(*mut raw::RedisModuleCommand, *const c_char) -> c_int;

/// Declares one command's key specs and docs, and its ACL categories where the server can.
fn declare_command(
    ctx: &Context,
    get: GetCommand,
    set_info: SetInfo,
    set_categories: Option<SetCategories>,
    info: &CommandInfo,
    category: Option<&str>,
) -> Status {
    let name = info.name.to_string_lossy();
    // SAFETY: OnLoad's context; the command was created earlier in OnLoad.
    let command = unsafe { get(ctx.ctx, info.name.as_ptr()) };
    if command.is_null() {
        ctx.log_warning(&format!("lcbloom: command {name} is not registered"));
        return Status::Err;
    }
    let declared = RawInfo::new(info);
    // SAFETY: `declared` holds every array and string the struct points to until the call
    // returns; Redis copies them.
    if unsafe { set_info(command, &declared.info) } != raw::Status::Ok as c_int {
        ctx.log_warning(&format!("lcbloom: the server refused the info of {name}"));
        return Status::Err;
    }
    if let Some(set_categories) = set_categories {
        let categories =
            CString::new(info.acl_categories(category)).expect("category names have no NUL");
        // SAFETY: a command of this module during OnLoad, a NUL-terminated string.
        if unsafe { set_categories(command, categories.as_ptr()) } != raw::Status::Ok as c_int {
            ctx.log_warning(&format!(
                "lcbloom: the server refused the ACL categories {categories:?} of {name}"
            ));
            return Status::Err;
        }
    }
    Status::Ok
}

/// Linux's EBUSY, what `RedisModule_AddACLCategory` sets for a category that exists.
const EBUSY: i32 = 16;

/// A [`CommandInfo`] as the C structs `RedisModule_SetCommandInfo` reads, with the arrays
/// they point to. The Vecs' heap buffers do not move when the Vecs do.
struct RawInfo {
    info: raw::RedisModuleCommandInfo,
    _keys: Vec<raw::RedisModuleCommandKeySpec>,
    _args: Vec<Vec<raw::RedisModuleCommandArg>>,
}

impl RawInfo {
    fn new(command: &CommandInfo) -> RawInfo {
        let mut keys: Vec<raw::RedisModuleCommandKeySpec> =
            command.keys.iter().map(raw_key_spec).collect();
        keys.push(zeroed_key_spec());
        let mut args = Vec::new();
        let args_ptr = raw_args(command.args, &mut args);
        RawInfo {
            info: raw::RedisModuleCommandInfo {
                version: &INFO_VERSION,
                summary: command.summary.as_ptr(),
                complexity: command.complexity.as_ptr(),
                since: command.since.as_ptr(),
                history: ptr::null_mut(),
                tips: ptr::null(),
                arity: command.arity(),
                key_specs: keys.as_mut_ptr(),
                args: args_ptr,
            },
            _keys: keys,
            _args: args,
        }
    }
}

fn zeroed_key_spec() -> raw::RedisModuleCommandKeySpec {
    // SAFETY: the struct is pointers, integers and unions of those: all-zero is valid, and
    // is the terminator Redis looks for (begin_search_type 0).
    unsafe { std::mem::zeroed() }
}

fn raw_key_spec(spec: &KeySpec) -> raw::RedisModuleCommandKeySpec {
    let mut out = zeroed_key_spec();
    out.flags = u64::from(spec.flags);
    out.begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    out.bs.index.pos = spec.index;
    out.find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    out.fk.range.lastkey = spec.last;
    out.fk.range.keystep = spec.step;
    out.fk.range.limit = 0;
    out
}

/// Builds the zero-terminated array for `args` (and, first, those of their sub-arguments)
/// into `arena`, returning a pointer to it.
fn raw_args(
    args: &[Arg],
    arena: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = Vec::with_capacity(args.len() + 1);
    for a in args {
        let (type_, key_spec_index, subargs) = match a.kind {
            ArgKind::Key(spec) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                spec as c_int,
                ptr::null_mut(),
            ),
            ArgKind::String => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                -1,
                ptr::null_mut(),
            ),
            ArgKind::Integer => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                -1,
                ptr::null_mut(),
            ),
            ArgKind::Double => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_DOUBLE,
                -1,
                ptr::null_mut(),
            ),
            ArgKind::Token => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                -1,
                ptr::null_mut(),
            ),
            ArgKind::OneOf(subs) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                -1,
                raw_args(subs, arena),
            ),
            ArgKind::Block(subs) => (
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                -1,
                raw_args(subs, arena),
            ),
        };
        let mut flags = raw::REDISMODULE_CMD_ARG_NONE;
        if a.optional {
            flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
        }
        if a.multiple {
            flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
        }
        out.push(raw::RedisModuleCommandArg {
            name: a.name.as_ptr(),
            type_,
            key_spec_index,
            token: a.token.map_or(ptr::null(), CStr::as_ptr),
            summary: ptr::null(),
            since: ptr::null(),
            flags: flags as c_int,
            deprecated_since: ptr::null(),
            subargs,
            display_text: ptr::null::<c_char>(),
        });
    }
    // SAFETY: as for the key spec: all-zero is valid and terminates the array (name NULL).
    out.push(unsafe { std::mem::zeroed() });
    let first = out.as_mut_ptr();
    arena.push(out);
    first
}

/// What Redis's `moduleValidateCommandInfo` would refuse at load, checked by each family's unit
/// tests on its table first: lower-case unique names, docs, exactly one of `write` and
/// `readonly`, key specs that match the flags and the arguments.
#[cfg(test)]
pub fn check_table(commands: &[CommandInfo]) {
    let mut names: Vec<&CStr> = commands.iter().map(|c| c.name).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), commands.len(), "a command is listed twice");
    let access_kind = raw::REDISMODULE_CMD_KEY_RO
        | raw::REDISMODULE_CMD_KEY_RW
        | raw::REDISMODULE_CMD_KEY_OW
        | raw::REDISMODULE_CMD_KEY_RM;
    let write_kind = raw::REDISMODULE_CMD_KEY_INSERT
        | raw::REDISMODULE_CMD_KEY_UPDATE
        | raw::REDISMODULE_CMD_KEY_DELETE;
    for c in commands {
        let name = c.name.to_str().unwrap();
        assert_eq!(name, name.to_lowercase());
        assert!(!c.summary.is_empty() && !c.complexity.is_empty());
        let writes = c.flags.split_whitespace().any(|f| f == "write");
        let reads = c.flags.split_whitespace().any(|f| f == "readonly");
        assert!(writes != reads, "{name}: exactly one of write, readonly");
        for k in c.keys {
            assert_eq!((k.flags & access_kind).count_ones(), 1, "{name}");
            assert!((k.flags & write_kind).count_ones() <= 1, "{name}");
            // A read-only command writes no key; a write command writes one.
            assert!(writes || k.flags & write_kind == 0, "{name}");
        }
        assert!(
            !writes || c.keys.iter().any(|k| k.flags & write_kind != 0),
            "{name} writes no key"
        );
        // Every spec is named by a key argument and every key argument names a spec.
        let mut used = vec![false; c.keys.len()];
        for a in c.args {
            if let ArgKind::Key(i) = a.kind {
                assert!(i < c.keys.len(), "{name}: key spec {i} missing");
                used[i] = true;
            }
        }
        assert!(
            used.iter().all(|&u| u),
            "{name}: a key spec without argument"
        );
        check_args(name, c.args);
    }
}

#[cfg(test)]
fn check_args(name: &str, args: &[Arg]) {
    for a in args {
        match a.kind {
            ArgKind::Token => assert!(a.token.is_some(), "{name}: token without keyword"),
            ArgKind::OneOf(subs) | ArgKind::Block(subs) => {
                assert!(!subs.is_empty(), "{name}");
                check_args(name, subs);
            }
            _ => {}
        }
    }
}

/// A family's table: what Redis accepts (`check_table`), every command named with the
/// family's `prefix`, and exactly the `expected` commands with these arities (unit tests).
#[cfg(test)]
pub fn check_family_table(commands: &[CommandInfo], prefix: &str, expected: &[(&str, i32)]) {
    check_table(commands);
    for c in commands {
        let name = c.name.to_str().unwrap();
        assert!(name.starts_with(prefix), "{name} outside {prefix}");
    }
    assert_eq!(expected.len(), commands.len());
    for &(name, arity) in expected {
        assert_eq!(row(commands, name).arity(), arity, "{name}");
    }
}

/// The row named `name` (unit tests).
#[cfg(test)]
pub fn row<'a>(commands: &'a [CommandInfo], name: &str) -> &'a CommandInfo {
    commands
        .iter()
        .find(|c| c.name.to_str() == Ok(name))
        .unwrap_or_else(|| panic!("{name} missing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A choice whose second branch is a block of two arguments.
    const FORM: Arg = arg(c"form", ArgKind::OneOf(&[string(c"payload"), CHUNK]));
    const CHUNK: Arg = arg(c"chunk", ArgKind::Block(&[integer(c"i"), string(c"piece")]));

    const ITEMS: &[Arg] = &[key(c"key", 0), string(c"item").multiple()];
    const KEYS: &[Arg] = &[key(c"key", 0).multiple()];
    const LOAD: &[Arg] = &[key(c"key", 0), FORM, token(c"fast", c"FAST").optional()];

    /// Rows shaped as the families' are: one key, a multi-key read, nested arguments.
    static ROWS: &[CommandInfo] = &[
        documented(c"t.add", "write deny-oom fast", &[key_at(1, ADD)], ITEMS),
        documented(c"t.count", "readonly", &[keys_from(1, READ)], KEYS),
        documented(c"t.load", "write deny-oom", &[key_at(1, RESTORE)], LOAD),
    ];

    const fn documented(
        name: &'static CStr,
        flags: &'static str,
        keys: &'static [KeySpec],
        args: &'static [Arg],
    ) -> CommandInfo {
        CommandInfo::new(name, None, flags, keys, args).docs(c"s", c"O(n)")
    }

    #[test]
    fn rows_are_what_redis_accepts() {
        check_table(ROWS);
    }

    #[test]
    fn arity_and_legacy_ranges_follow_the_arguments() {
        assert_eq!(row(ROWS, "t.add").arity(), -3);
        assert_eq!(row(ROWS, "t.count").arity(), -2);
        assert_eq!(row(ROWS, "t.load").arity(), -3);
        assert_eq!(row(ROWS, "t.add").legacy_keys(), (1, 1, 1));
        assert_eq!(row(ROWS, "t.count").legacy_keys(), (1, -1, 1));
    }

    #[test]
    fn categories_follow_the_flags_and_the_family() {
        assert_eq!(row(ROWS, "t.add").acl_categories(Some("t")), "write fast t");
        assert_eq!(
            row(ROWS, "t.count").acl_categories(Some("t")),
            "read slow t"
        );
        assert_eq!(row(ROWS, "t.load").acl_categories(None), "write slow");
    }

    #[test]
    fn raw_arguments_are_terminated_and_nested() {
        let mut arena = Vec::new();
        let first = raw_args(row(ROWS, "t.load").args, &mut arena);
        // SAFETY: the arena holds the arrays; each ends with a zeroed element.
        unsafe {
            assert_eq!(CStr::from_ptr((*first).name), c"key");
            let form = &*first.add(1);
            assert_eq!(CStr::from_ptr((*first.add(2)).name), c"fast");
            assert!((*first.add(3)).name.is_null());
            let choice = &*form.subargs.add(1);
            assert_eq!(CStr::from_ptr(choice.name), c"chunk");
            assert_eq!(CStr::from_ptr((*choice.subargs.add(1)).name), c"piece");
            assert!((*choice.subargs.add(2)).name.is_null());
        }
        assert_eq!(arena.len(), 3);
    }
}
