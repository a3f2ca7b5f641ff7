//! The module's load arguments (`--loadmodule lcbloom.so NAME VALUE ...`, `MODULE LOAD`):
//! name and value pairs, each name a config of some family (`bf-error-rate`), or RedisBloom's
//! name for one (`ERROR_RATE`), or a RedisBloom argument for a type lcbloom does not have.
//!
//! * A config's name or its RedisBloom name (either case): the value, checked as the config
//!   checks it, becomes the config's default; logged at notice level.
//! * A RedisBloom argument for a type lcbloom does not have (`CF_MAX_EXPANSIONS`): logged at
//!   warning level and ignored, so that a `loadmodule` line written for RedisBloom still
//!   starts the server.
//! * Anything else, a bad value, a name without a value, or one setting given twice: the load
//!   fails (the server does not start) with a warning naming the argument, its value and
//!   what is allowed.

use crate::server::config::Config;

/// A load argument that is accepted and ignored, and why.
pub struct Ignored {
    /// As RedisBloom spells it; matched in either case.
    pub name: &'static str,
    /// Why it means nothing here ("lcbloom has no cuckoo filters").
    pub why: &'static str,
}

/// What the arguments asked for: per config (by its index in `configs`), the value given.
pub struct Settings<'a> {
    values: Vec<Option<&'a str>>,
}

impl<'a> Settings<'a> {
    /// The value given for the config at `index` in the list `parse` was handed.
    pub fn value(&self, index: usize) -> Option<&'a str> {
        self.values.get(index).copied().flatten()
    }
}

/// A line for the server log.
#[derive(Debug, PartialEq)]
pub struct LogLine {
    /// Warning level, else notice.
    pub warning: bool,
    pub text: String,
}

/// An argument's text for the log: valid UTF-8 as it is, else escaped, and cut at 100 bytes.
fn shown(arg: &[u8]) -> String {
    let text: String = match std::str::from_utf8(arg) {
        Ok(s) => s.chars().take(100).collect(),
        Err(_) => arg
            .iter()
            .take(100)
            .flat_map(|b| std::ascii::escape_default(*b))
            .map(char::from)
            .collect(),
    };
    format!("'{text}'")
}

/// Reads the load arguments against `configs` and `ignored`. Returns the settings and the
/// lines to log (notice level for settings, warning level for ignored arguments), or the
/// reason the load must fail.
pub fn parse<'a>(
    args: &[&'a [u8]],
    configs: &[&Config],
    ignored: &[&Ignored],
) -> Result<(Settings<'a>, Vec<LogLine>), String> {
    let mut values: Vec<Option<&'a str>> = vec![None; configs.len()];
    let mut log = Vec::new();
    let known = || {
        let names: Vec<String> = configs
            .iter()
            .map(|c| match c.redisbloom {
                Some(rb) => format!("{} (RedisBloom: {rb})", c.name()),
                None => c.name().to_string(),
            })
            .chain(ignored.iter().map(|i| format!("{} (ignored)", i.name)))
            .collect();
        names.join(", ")
    };
    for pair in args.chunks(2) {
        let name = pair[0];
        let Some(&value) = pair.get(1) else {
            return Err(format!(
                "load argument {} has no value; arguments are name and value pairs",
                shown(name)
            ));
        };
        let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
        let own = configs.iter().position(|c| is(c.name())).map(|i| (i, ""));
        let theirs = || {
            let i = configs.iter().position(|c| c.redisbloom.is_some_and(is))?;
            Some((i, "RedisBloom's "))
        };
        if let Some((i, whose)) = own.or_else(theirs) {
            let config = configs[i];
            set(&mut values[i], config, name, value)?;
            log.push(LogLine {
                warning: false,
                text: format!(
                    "lcbloom: {whose}load argument {} {} sets {}",
                    shown(name),
                    shown(value),
                    config.name()
                ),
            });
        } else if let Some(skip) = ignored.iter().find(|i| is(i.name)) {
            log.push(LogLine {
                warning: true,
                text: format!(
                    "lcbloom: ignoring RedisBloom's load argument {} {}: {}",
                    shown(name),
                    shown(value),
                    skip.why
                ),
            });
        } else {
            return Err(format!(
                "unknown load argument {} (value {}); allowed: {}",
                shown(name),
                shown(value),
                known()
            ));
        }
    }
    Ok((Settings { values }, log))
}

/// Checks `value` for `config` and records it; a second value for one config is refused.
fn set<'a>(
    slot: &mut Option<&'a str>,
    config: &Config,
    name: &[u8],
    value: &'a [u8],
) -> Result<(), String> {
    let bad = || {
        format!(
            "load argument {} has the value {}; allowed: {}",
            shown(name),
            shown(value),
            config.allowed()
        )
    };
    let text = std::str::from_utf8(value).map_err(|_| bad())?;
    if !config.accepts(text) {
        return Err(bad());
    }
    if slot.is_some() {
        return Err(format!(
            "load argument {} sets {}, which an earlier argument set already",
            shown(name),
            config.name()
        ));
    }
    *slot = Some(text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::config::{Integer, Rate, Setting};

    static SIZE: Integer = Integer::new(100, 1, 1 << 50);
    static RATE: Rate = Rate::new(0.01);
    static CONFIGS: [Config; 2] = [
        Config::new(c"bf-initial-size", Setting::Integer(&SIZE)).or_redisbloom("INITIAL_SIZE"),
        Config::new(c"bf-error-rate", Setting::Rate(&RATE)).or_redisbloom("ERROR_RATE"),
    ];
    static CUCKOO: Ignored = Ignored {
        name: "CF_MAX_EXPANSIONS",
        why: "lcbloom has no cuckoo filters",
    };

    type Parsed = (Vec<Option<String>>, Vec<LogLine>);

    fn run(args: &[&str]) -> Result<Parsed, String> {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let configs: Vec<&Config> = CONFIGS.iter().collect();
        let (settings, log) = parse(&args, &configs, &[&CUCKOO])?;
        let values = (0..2)
            .map(|i| settings.value(i).map(str::to_string))
            .collect();
        Ok((values, log))
    }

    #[test]
    fn redisbloom_arguments_set_the_matching_configs() {
        let (values, log) = run(&["INITIAL_SIZE", "400", "error_rate", "0.004"]).unwrap();
        assert_eq!(values, [Some("400".into()), Some("0.004".into())]);
        assert_eq!(
            log[0],
            LogLine {
                warning: false,
                text:
                    "lcbloom: RedisBloom's load argument 'INITIAL_SIZE' '400' sets bf-initial-size"
                        .into()
            }
        );
        let (values, _) = run(&["BF-ERROR-RATE", "0.5"]).unwrap();
        assert_eq!(values, [None, Some("0.5".into())]);
    }

    #[test]
    fn arguments_for_missing_types_are_ignored_with_a_warning() {
        let (values, log) = run(&["CF_MAX_EXPANSIONS", "32", "bf-initial-size", "7"]).unwrap();
        assert_eq!(values, [Some("7".into()), None]);
        assert_eq!(
            log[0],
            LogLine {
                warning: true,
                text: "lcbloom: ignoring RedisBloom's load argument 'CF_MAX_EXPANSIONS' '32': \
                 lcbloom has no cuckoo filters"
                    .into()
            }
        );
    }

    #[test]
    fn bad_arguments_name_the_argument_the_value_and_what_is_allowed() {
        let e = run(&["bf-eror-rate", "0.001"]).unwrap_err();
        assert!(e.starts_with("unknown load argument 'bf-eror-rate' (value '0.001'); allowed: bf-initial-size (RedisBloom: INITIAL_SIZE), bf-error-rate (RedisBloom: ERROR_RATE), CF_MAX_EXPANSIONS (ignored)"), "{e}");
        let e = run(&["bf-initial-size", "abc"]).unwrap_err();
        assert_eq!(e, "load argument 'bf-initial-size' has the value 'abc'; allowed: an integer from 1 to 1125899906842624");
        let e = run(&["ERROR_RATE", "1.5"]).unwrap_err();
        assert_eq!(e, "load argument 'ERROR_RATE' has the value '1.5'; allowed: a number strictly between 0 and 1");
        let e = run(&["bf-initial-size"]).unwrap_err();
        assert!(e.contains("has no value"), "{e}");
        let e = run(&["INITIAL_SIZE", "5", "bf-initial-size", "6"]).unwrap_err();
        assert!(e.contains("an earlier argument set already"), "{e}");
    }
}
