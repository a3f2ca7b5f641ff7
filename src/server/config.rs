//! Module configs: the table type every family fills with its own ([`Config`]), their
//! registration with the server, and the configs every family shares (`max-memory-per-key`,
//! `max-items-per-command`, in `limits.rs`).
//!
//! A config is set as a load argument (`--loadmodule lcbloom.so bf-error-rate 0.001`, read by
//! `load_args.rs`), in redis.conf (`lcbloom.bf-error-rate 0.001`) and with
//! `CONFIG SET lcbloom.<name>`. Each is validated, and a bad value is refused with a text that
//! names what is allowed.
//!
//! The configs are registered from `OnLoad` through the module API
//! (`RedisModule_Register*Config`, then `RedisModule_LoadConfigs`), not through the
//! `redis_module!` macro's list, so that each family's configs live in its own folder and the
//! load arguments are checked here (the macro's parsing ignores unknown arguments and names no
//! option in its errors). The callbacks' private data is the config's own `'static` value:
//! nothing is allocated per config.
//!
//! Defaults only matter when a command creates a key without explicit parameters (`BF.ADD` or
//! `LC.ADD` on a missing key); such commands replicate the parameters they actually used, so a
//! replica or an AOF replay with other defaults still builds the same value.

use crate::server::ffi::{guard_callback, random_u64};
use redis_module::configuration::ConfigurationFlags;
use redis_module::{raw, Context};
use std::ffi::{c_char, c_int, c_longlong, c_void, CStr, CString};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU64, Ordering};

/// One module config: `lcbloom.<name>`.
pub struct Config {
    /// The name after `lcbloom.`, also its load argument's name.
    pub name: &'static CStr,
    /// RedisBloom's load argument for the same setting (`ERROR_RATE`), honoured at load so
    /// that a `loadmodule` line written for RedisBloom keeps its meaning.
    pub redisbloom: Option<&'static str>,
    pub setting: Setting,
}

/// What a config holds.
pub enum Setting {
    Integer(&'static Integer),
    Rate(&'static Rate),
    Choice(&'static Choice),
    Seed(&'static Seed),
}

/// An integer config in `min..=max`.
pub struct Integer {
    value: AtomicI64,
    default: i64,
    min: i64,
    max: i64,
    /// A byte count: `1gb`, `512mb` … are accepted (Redis's memory units).
    bytes: bool,
}

impl Integer {
    pub const fn new(default: i64, min: i64, max: i64) -> Self {
        Self {
            value: AtomicI64::new(default),
            default,
            min,
            max,
            bytes: false,
        }
    }

    /// A byte count, given with or without Redis's memory units.
    pub const fn bytes(default: i64, min: i64, max: i64) -> Self {
        Self {
            bytes: true,
            ..Self::new(default, min, max)
        }
    }

    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    fn parse(&self, text: &str) -> Option<i64> {
        let n = if self.bytes {
            parse_bytes(text)?
        } else {
            text.parse().ok()?
        };
        (self.min..=self.max).contains(&n).then_some(n)
    }

    fn allowed(&self) -> String {
        let units = if self.bytes {
            " (bytes; the units k, kb, m, mb, g, gb are accepted)"
        } else {
            ""
        };
        format!("an integer from {} to {}{units}", self.min, self.max)
    }
}

/// A byte count as Redis's configs take it: digits, then optionally k, kb, m, mb, g or gb
/// (k = 1000, kb = 1024 …), case-insensitive.
fn parse_bytes(text: &str) -> Option<i64> {
    let lower = text.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: i64 = match &lower[digits.len()..] {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok()?.checked_mul(unit)
}

/// A decimal integer from 0 to 2^64 − 1, digits only: a file written for an earlier version
/// may pad them with zeros.
fn parse_u64_text(text: &str) -> Option<u64> {
    // Digits only: `parse` alone would take a leading `+`.
    text.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| text.parse().ok())
        .flatten()
}

/// A config the module API holds as a string: how it is shown and set.
trait Text: Sync + 'static {
    /// What a valid value is, for error messages.
    fn allowed(&self) -> String;
    /// The value as `CONFIG GET` shows it.
    fn show(&self) -> String;
    /// Sets the value from its text: false (nothing changed) if the text is not valid.
    fn set_text(&self, text: &str) -> bool;
    /// The string the last `CONFIG GET` was given: Redis copies it, and it is freed at the
    /// next one, so showing the value leaks nothing.
    fn shown(&self) -> &AtomicPtr<raw::RedisModuleString>;
}

/// A probability strictly between 0 and 1, and at least a family's smallest when it has one
/// (a string config: the module API has no float configs), stored as the bits of an f64.
pub struct Rate {
    bits: AtomicU64,
    default: f64,
    least: Option<Least>,
    shown: AtomicPtr<raw::RedisModuleString>,
}

/// The smallest rate a [`Rate`] accepts (a function: it may be computed), and why.
#[derive(Clone, Copy)]
struct Least {
    rate: fn() -> f64,
    why: &'static str,
}

impl Rate {
    pub const fn new(default: f64) -> Self {
        Self {
            bits: AtomicU64::new(default.to_bits()),
            default,
            least: None,
            shown: AtomicPtr::new(null_mut()),
        }
    }

    /// A rate of at least `least()`, which `why` explains in error messages: a config must
    /// refuse what the commands it serves would refuse.
    pub const fn at_least(default: f64, least: fn() -> f64, why: &'static str) -> Self {
        Self {
            least: Some(Least { rate: least, why }),
            ..Self::new(default)
        }
    }

    pub fn get(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Relaxed))
    }

    fn parse(&self, text: &str) -> Option<f64> {
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.len() != text.len() {
            return None;
        }
        let least = self.least.map_or(0.0, |least| (least.rate)());
        trimmed
            .parse::<f64>()
            .ok()
            .filter(|r| *r > 0.0 && *r < 1.0 && *r >= least)
    }
}

impl Text for Rate {
    fn allowed(&self) -> String {
        match self.least {
            Some(Least { rate, why }) => {
                format!("a number from {} ({why}) to 1, 1 excluded", rate())
            }
            None => "a number strictly between 0 and 1".to_string(),
        }
    }

    fn show(&self) -> String {
        // Rust prints the shortest text that parses back to the same f64.
        self.get().to_string()
    }

    fn set_text(&self, text: &str) -> bool {
        let rate = self.parse(text);
        if let Some(r) = rate {
            self.bits.store(r.to_bits(), Ordering::Relaxed);
        }
        rate.is_some()
    }

    fn shown(&self) -> &AtomicPtr<raw::RedisModuleString> {
        &self.shown
    }
}

/// A hash seed for new values: `random` (a fresh one for each, from the server's random
/// source) or a fixed number from 0 to 2^64 − 1 (a string config: the module API's numeric
/// configs are i64).
pub struct Seed {
    random: AtomicBool,
    fixed: AtomicU64,
    shown: AtomicPtr<raw::RedisModuleString>,
}

impl Seed {
    /// A seed config whose default is `random`.
    pub const fn random() -> Self {
        Self {
            random: AtomicBool::new(true),
            fixed: AtomicU64::new(0),
            shown: AtomicPtr::new(null_mut()),
        }
    }

    /// The configured fixed seed, or None for `random`.
    pub fn get(&self) -> Option<u64> {
        (!self.random.load(Ordering::Relaxed)).then(|| self.fixed.load(Ordering::Relaxed))
    }

    /// The seed for a new value: the fixed one, or a fresh random one.
    pub fn draw(&self) -> u64 {
        self.get().unwrap_or_else(random_u64)
    }

    /// `random` (any case) as None, a number as itself.
    fn parse(text: &str) -> Option<Option<u64>> {
        if text.eq_ignore_ascii_case("random") {
            return Some(None);
        }
        parse_u64_text(text).map(Some)
    }
}

impl Text for Seed {
    fn allowed(&self) -> String {
        "random, or a number from 0 to 18446744073709551615".to_string()
    }

    fn show(&self) -> String {
        match self.get() {
            Some(seed) => seed.to_string(),
            None => "random".to_string(),
        }
    }

    fn set_text(&self, text: &str) -> bool {
        let Some(seed) = Seed::parse(text) else {
            return false;
        };
        // The number first: a command reads `random` and then the number.
        self.fixed.store(seed.unwrap_or(0), Ordering::Relaxed);
        self.random.store(seed.is_none(), Ordering::Relaxed);
        true
    }

    fn shown(&self) -> &AtomicPtr<raw::RedisModuleString> {
        &self.shown
    }
}

/// One of a list of names (an enum config); the value is the index of the name.
pub struct Choice {
    index: AtomicI32,
    names: &'static [&'static CStr],
    default: i32,
    /// Told the index on every set (the one at load included): a setting a lower layer keeps.
    apply: Option<fn(usize)>,
}

impl Choice {
    pub const fn new(names: &'static [&'static CStr], default: i32) -> Self {
        Self {
            index: AtomicI32::new(default),
            names,
            default,
            apply: None,
        }
    }

    /// The same choice, handed to `apply` whenever it is set, the value it loads with too:
    /// for a setting kept by a layer below the configs, which must not read them.
    pub const fn applied_by(mut self, apply: fn(usize)) -> Self {
        self.apply = Some(apply);
        self
    }

    /// The index of the chosen name.
    pub fn get(&self) -> usize {
        self.index.load(Ordering::Relaxed) as usize
    }

    /// The names, in index order.
    pub fn names(&self) -> &'static [&'static CStr] {
        self.names
    }

    /// The chosen name.
    pub fn name(&self) -> &'static str {
        self.names
            .get(self.get())
            .and_then(|n| n.to_str().ok())
            .unwrap_or("")
    }

    fn parse(&self, text: &str) -> Option<i32> {
        let text = text.to_ascii_lowercase();
        self.names
            .iter()
            .position(|n| n.to_bytes() == text.as_bytes())
            .map(|i| i as i32)
    }

    fn allowed(&self) -> String {
        let names: Vec<&str> = self.names.iter().filter_map(|n| n.to_str().ok()).collect();
        format!("one of {}", names.join(", "))
    }
}

impl Config {
    pub const fn new(name: &'static CStr, setting: Setting) -> Config {
        Config {
            name,
            redisbloom: None,
            setting,
        }
    }

    /// The same config, also set by RedisBloom's load argument `name`.
    pub const fn or_redisbloom(mut self, name: &'static str) -> Config {
        self.redisbloom = Some(name);
        self
    }

    pub fn name(&self) -> &'static str {
        self.name.to_str().unwrap_or("")
    }

    /// Whether `text` is a valid value.
    pub fn accepts(&self, text: &str) -> bool {
        match self.setting {
            Setting::Integer(i) => i.parse(text).is_some(),
            Setting::Rate(r) => r.parse(text).is_some(),
            Setting::Choice(c) => c.parse(text).is_some(),
            Setting::Seed(_) => Seed::parse(text).is_some(),
        }
    }

    /// What a valid value is, for error messages.
    pub fn allowed(&self) -> String {
        match self.setting {
            Setting::Integer(i) => i.allowed(),
            Setting::Rate(r) => r.allowed(),
            Setting::Choice(c) => c.allowed(),
            Setting::Seed(s) => s.allowed(),
        }
    }

    /// Registers the config with `value` (checked by [`Config::accepts`]) as its default,
    /// else its built-in default.
    pub fn register(&'static self, ctx: &Context, value: Option<&str>) -> Result<(), String> {
        let failed = || format!("the server refused the config {}", self.name());
        // SAFETY: reads of function pointers Redis sets before OnLoad.
        let (numeric, string, choice) = unsafe {
            (
                raw::RedisModule_RegisterNumericConfig,
                raw::RedisModule_RegisterStringConfig,
                raw::RedisModule_RegisterEnumConfig,
            )
        };
        let (Some(numeric), Some(string), Some(choice)) = (numeric, string, choice) else {
            return Err("this server has no module configs (Redis 7.0+)".into());
        };
        // Each call: OnLoad's context, NUL-terminated names, callbacks of the matching kind
        // whose private data is this config's `'static` value. Redis copies the name, the
        // default and the enum names.
        let status = match self.setting {
            Setting::Integer(i) => {
                let default = value.and_then(|v| i.parse(v)).unwrap_or(i.default);
                let flags = if i.bytes {
                    ConfigurationFlags::MEMORY
                } else {
                    ConfigurationFlags::DEFAULT
                };
                // SAFETY: as said above.
                unsafe {
                    numeric(
                        ctx.ctx,
                        self.name.as_ptr(),
                        default,
                        flags.bits(),
                        i.min,
                        i.max,
                        Some(get_integer),
                        Some(set_integer),
                        None,
                        std::ptr::from_ref(i).cast_mut().cast(),
                    )
                }
            }
            Setting::Rate(r) => {
                let default = value
                    .and_then(|v| r.parse(v))
                    .unwrap_or(r.default)
                    .to_string();
                let default = CString::new(default).map_err(|_| failed())?;
                // SAFETY: as said above.
                unsafe { register_text(string, ctx, self.name, &default, r) }
            }
            Setting::Seed(s) => {
                let default = CString::new(value.unwrap_or("random")).map_err(|_| failed())?;
                // SAFETY: as said above.
                unsafe { register_text(string, ctx, self.name, &default, s) }
            }
            Setting::Choice(c) => {
                let default = value.and_then(|v| c.parse(v)).unwrap_or(c.default);
                let mut names: Vec<*const c_char> = c.names.iter().map(|n| n.as_ptr()).collect();
                let values: Vec<c_int> = (0..names.len() as c_int).collect();
                // SAFETY: as said above.
                unsafe {
                    choice(
                        ctx.ctx,
                        self.name.as_ptr(),
                        default,
                        ConfigurationFlags::DEFAULT.bits(),
                        names.as_mut_ptr(),
                        values.as_ptr(),
                        names.len() as c_int,
                        Some(get_choice),
                        Some(set_choice),
                        None,
                        std::ptr::from_ref(c).cast_mut().cast(),
                    )
                }
            }
        };
        if status == raw::Status::Ok as c_int {
            Ok(())
        } else {
            Err(failed())
        }
    }
}

/// Registers a string config whose private data is `config`.
///
/// # Safety
/// `register` is `RedisModule_RegisterStringConfig` and `ctx` `OnLoad`'s context.
unsafe fn register_text<T: Text>(
    register: unsafe extern "C" fn(
        *mut raw::RedisModuleCtx,
        *const c_char,
        *const c_char,
        std::ffi::c_uint,
        raw::RedisModuleConfigGetStringFunc,
        raw::RedisModuleConfigSetStringFunc,
        raw::RedisModuleConfigApplyFunc,
        *mut c_void,
    ) -> c_int,
    ctx: &Context,
    name: &CStr,
    default: &CStr,
    config: &'static T,
) -> c_int {
    // SAFETY: the caller's contract; Redis copies the name and the default.
    unsafe {
        register(
            ctx.ctx,
            name.as_ptr(),
            default.as_ptr(),
            ConfigurationFlags::DEFAULT.bits(),
            Some(get_text::<T>),
            Some(set_text::<T>),
            None,
            std::ptr::from_ref(config).cast_mut().cast(),
        )
    }
}

/// Applies what redis.conf and `MODULE LOADEX … CONFIG` say about the registered configs
/// (and their defaults otherwise); the last step of registering configs.
pub fn load_configs(ctx: &Context) -> Result<(), String> {
    // SAFETY: a read of a function pointer Redis sets before OnLoad.
    let Some(load) = (unsafe { raw::RedisModule_LoadConfigs }) else {
        return Err("this server has no module configs (Redis 7.0+)".into());
    };
    // SAFETY: OnLoad's context, after every config was registered.
    if unsafe { load(ctx.ctx) } == raw::Status::Ok as c_int {
        Ok(())
    } else {
        Err("the server refused a config's value from its configuration (see above)".into())
    }
}

/// Where a config's set callback may leave its error message for Redis.
type ErrorSlot = *mut *mut raw::RedisModuleString;

/// # Safety
/// `privdata` is what `register` gave for a config of this kind: a `&'static T`.
unsafe fn setting<'a, T>(privdata: *mut c_void) -> &'a T {
    // SAFETY: the caller's contract.
    unsafe { &*privdata.cast::<T>() }
}

/// Sets `*err` to `message` for Redis (which frees it).
///
/// # Safety
/// `err` is the error slot Redis passed to a config's set callback.
unsafe fn refuse(err: ErrorSlot, message: &str) -> c_int {
    // SAFETY: a read of a function pointer Redis sets at load; a string with no context is
    // the kind Redis expects here.
    unsafe {
        if let (false, Some(create)) = (err.is_null(), raw::RedisModule_CreateString) {
            *err = create(null_mut(), message.as_ptr().cast(), message.len());
        }
    }
    raw::Status::Err as c_int
}

extern "C" fn get_integer(_name: *const c_char, privdata: *mut c_void) -> c_longlong {
    guard_callback("config get", 0, || {
        // SAFETY: registered with an `Integer` as private data.
        let integer = unsafe { setting::<Integer>(privdata) };
        integer.get()
    })
}

extern "C" fn set_integer(
    _name: *const c_char,
    value: c_longlong,
    privdata: *mut c_void,
    _err: ErrorSlot,
) -> c_int {
    guard_callback("config set", raw::Status::Err as c_int, || {
        // SAFETY: registered with an `Integer` as private data. Redis checked min..=max.
        unsafe { setting::<Integer>(privdata) }
            .value
            .store(value, Ordering::Relaxed);
        raw::Status::Ok as c_int
    })
}

extern "C" fn get_text<T: Text>(
    _name: *const c_char,
    privdata: *mut c_void,
) -> *mut raw::RedisModuleString {
    guard_callback("config get", null_mut(), || {
        // SAFETY: registered with a `T` as private data; reads of function pointers Redis
        // sets at load.
        unsafe {
            let config = setting::<T>(privdata);
            let (Some(create), Some(free)) =
                (raw::RedisModule_CreateString, raw::RedisModule_FreeString)
            else {
                return null_mut();
            };
            let text = config.show();
            let shown = create(null_mut(), text.as_ptr().cast(), text.len());
            let previous = config.shown().swap(shown, Ordering::Relaxed);
            if !previous.is_null() {
                free(null_mut(), previous);
            }
            shown
        }
    })
}

extern "C" fn set_text<T: Text>(
    name: *const c_char,
    value: *mut raw::RedisModuleString,
    privdata: *mut c_void,
    err: ErrorSlot,
) -> c_int {
    guard_callback("config set", raw::Status::Err as c_int, || {
        // SAFETY: registered with a `T` as private data; Redis passes the config's name and
        // a live string.
        unsafe {
            let config = setting::<T>(privdata);
            let text = redis_module::RedisString::string_as_slice(value);
            if std::str::from_utf8(text).is_ok_and(|t| config.set_text(t)) {
                raw::Status::Ok as c_int
            } else {
                let name = CStr::from_ptr(name).to_string_lossy();
                refuse(err, &format!("{name} must be {}", config.allowed()))
            }
        }
    })
}

extern "C" fn get_choice(_name: *const c_char, privdata: *mut c_void) -> c_int {
    guard_callback("config get", 0, || {
        // SAFETY: registered with a `Choice` as private data.
        unsafe { setting::<Choice>(privdata) }
            .index
            .load(Ordering::Relaxed)
    })
}

extern "C" fn set_choice(
    _name: *const c_char,
    value: c_int,
    privdata: *mut c_void,
    err: ErrorSlot,
) -> c_int {
    guard_callback("config set", raw::Status::Err as c_int, || {
        // SAFETY: registered with a `Choice` as private data; Redis passes one of the values
        // registered, checked again here.
        let choice = unsafe { setting::<Choice>(privdata) };
        if (0..choice.names.len() as c_int).contains(&value) {
            choice.index.store(value, Ordering::Relaxed);
            if let Some(apply) = choice.apply {
                apply(value as usize);
            }
            raw::Status::Ok as c_int
        } else {
            // SAFETY: Redis's error slot.
            unsafe { refuse(err, &choice.allowed()) }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_digits_and_may_be_padded() {
        assert_eq!(parse_u64_text("0042"), Some(42));
        assert_eq!(parse_u64_text("18446744073709551615"), Some(u64::MAX));
        for text in ["", "+1", "-1", " 1", "1 ", "18446744073709551616", "0x1"] {
            assert_eq!(parse_u64_text(text), None, "{text:?}");
        }
    }

    #[test]
    fn values_are_checked_as_documented() {
        static N: Integer = Integer::new(100, 1, 1 << 50);
        static B: Integer = Integer::bytes(1 << 30, 1024, i64::MAX);
        static R: Rate = Rate::new(0.01);
        static C: Choice = Choice::new(&[c"standard", c"blocked"], 0);
        let config = |setting| Config::new(c"x", setting);
        let n = config(Setting::Integer(&N));
        assert!(n.accepts("1") && n.accepts("400") && !n.accepts("0") && !n.accepts("abc"));
        assert!(!n.accepts("1e3") && !n.accepts(" 5"));
        assert_eq!(n.allowed(), "an integer from 1 to 1125899906842624");
        let b = config(Setting::Integer(&B));
        assert_eq!(parse_bytes("2gb"), Some(2 << 30));
        assert_eq!(parse_bytes("5MB"), Some(5 << 20));
        assert_eq!(parse_bytes("3k"), Some(3000));
        assert_eq!(parse_bytes("4096"), Some(4096));
        assert!(b.accepts("1mb") && !b.accepts("1") && !b.accepts("1tb") && !b.accepts("kb"));
        let r = config(Setting::Rate(&R));
        assert!(r.accepts("0.001") && r.accepts("1e-15"));
        assert!(!r.accepts("0") && !r.accepts("1") && !r.accepts("abc") && !r.accepts(" 0.1"));
        assert_eq!(r.allowed(), "a number strictly between 0 and 1");
        static LEAST: Rate = Rate::at_least(0.01, || 0.25, "a quarter");
        let least = config(Setting::Rate(&LEAST));
        assert!(least.accepts("0.25") && least.accepts("0.5"));
        assert!(!least.accepts("0.2499") && !least.accepts("1") && !LEAST.set_text("0.1"));
        assert_eq!(LEAST.get(), 0.01);
        assert_eq!(
            least.allowed(),
            "a number from 0.25 (a quarter) to 1, 1 excluded"
        );
        let c = config(Setting::Choice(&C));
        assert!(c.accepts("blocked") && c.accepts("STANDARD") && !c.accepts("fast"));
        assert_eq!(c.allowed(), "one of standard, blocked");
        assert_eq!(C.name(), "standard");
        static S: Seed = Seed::random();
        let s = config(Setting::Seed(&S));
        assert!(s.accepts("random") && s.accepts("RANDOM") && s.accepts("0"));
        assert!(s.accepts("18446744073709551615") && !s.accepts("18446744073709551616"));
        assert!(!s.accepts("-1") && !s.accepts(" 1") && !s.accepts("") && !s.accepts("0x10"));
        assert_eq!((S.get(), S.show()), (None, "random".to_string()));
        assert!(S.set_text("42") && !S.set_text("x"));
        assert_eq!(
            (S.get(), S.draw(), S.show()),
            (Some(42), 42, "42".to_string())
        );
        assert!(S.set_text("Random"));
        assert_eq!(S.get(), None);
    }
}
