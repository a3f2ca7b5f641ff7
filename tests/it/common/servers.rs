//! The server binaries the tests know besides the one under test (`server_binary`): the Redis
//! 7.2.6 and 7.4.1 builds in `shared/servers` beside the project (or beside a parent of it) and
//! Valkey 9 (`valkey`), each with the RDB versions it reads, so that a test can carry this
//! server's data to every server a user could move it to.

use super::{missing, server_binary, Server, ServerBuilder};
use std::path::Path;
use std::process::Command;

/// The Redis builds in `shared/servers`, newest first.
const SHARED_REDIS: [&str; 2] = ["redis-7.4.1", "redis-7.2.6"];

/// A server binary and what it is.
#[derive(Clone, Debug)]
pub struct Binary {
    pub path: String,
    pub valkey: bool,
    /// (major, minor, patch) as `--version` prints it.
    pub version: (u32, u32, u32),
}

impl Binary {
    /// What `path --version` says it is; None if it does not run or says something else.
    pub fn of(path: &str) -> Option<Binary> {
        let out = Command::new(path).arg("--version").output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let valkey = text.starts_with("Valkey server");
        if !valkey && !text.starts_with("Redis server") {
            return None;
        }
        let v = text.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
        let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
        let version = (parts.next()??, parts.next()??, parts.next()??);
        Some(Binary {
            path: path.to_string(),
            valkey,
            version,
        })
    }

    /// The binary under test.
    pub fn under_test() -> Binary {
        let path = server_binary();
        Binary::of(&path).unwrap_or_else(|| panic!("{path} --version names no Redis or Valkey"))
    }

    /// The RDB version it writes, where known here: Redis 7.0 writes 10, 7.2 11, 7.4 12;
    /// Valkey 9 writes 80.
    pub fn writes_rdb(&self) -> Option<u32> {
        match (self.valkey, self.version) {
            (true, _) => Some(80),
            (false, (7, 0, _)) => Some(10),
            (false, (7, 2, _)) => Some(11),
            (false, (7, 4, _)) => Some(12),
            (false, _) => None,
        }
    }

    /// Whether it loads RDB version `rdb`: a Redis server loads its own and older ones, Valkey
    /// 9 its own and Redis's up to 7.2's (11); with `rdb-version-check relaxed`, Valkey also
    /// loads Redis 7.4's (12), whose additions (hash field expiry) lcbloom's data does not use.
    pub fn reads_rdb(&self, rdb: u32, relaxed: bool) -> bool {
        match self.valkey {
            true => rdb <= 11 || rdb == 80 || (relaxed && rdb < 80),
            false => self.writes_rdb().is_some_and(|own| rdb <= own),
        }
    }
}

impl std::fmt::Display for Binary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor, patch) = self.version;
        let kind = if self.valkey { "Valkey" } else { "Redis" };
        write!(f, "{kind} {major}.{minor}.{patch}")
    }
}

/// The Redis builds in `shared/servers` that are there, newest first.
pub fn shared_redis() -> Vec<String> {
    let mut out = Vec::new();
    for dir in Path::new(env!("CARGO_MANIFEST_DIR")).ancestors() {
        for version in SHARED_REDIS {
            let path = dir
                .join("shared/servers")
                .join(version)
                .join("redis-server");
            if path.exists() {
                out.push(path.to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// Valkey 9's binary: `VALKEY_SERVER`, else what `scripts/fetch-tool.sh valkey` finds or fetches
/// (an installed valkey-server 9+, else `.tools/valkey-server`). None, said loudly, when it
/// cannot be had (a failure under `CI=true`, see `common::missing`).
fn valkey() -> Option<String> {
    if let Some(path) = std::env::var_os("VALKEY_SERVER") {
        return Some(path.to_string_lossy().into_owned());
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fetched = Command::new(root.join("scripts/fetch-tool.sh"))
        .arg("valkey")
        .current_dir(root)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_string());
    match fetched {
        Some(path) if Path::new(&path).exists() => Some(path),
        _ => {
            missing("Valkey 9 (scripts/fetch-tool.sh valkey)");
            None
        }
    }
}

/// A server binary that loads another's data, and whether it needs `rdb-version-check relaxed`
/// for that.
pub struct Reader {
    pub binary: Binary,
    relaxed: bool,
}

impl Reader {
    /// A server of this binary, set to load the data.
    pub fn builder(&self) -> ServerBuilder {
        let b = Server::builder().binary(&self.binary.path);
        match self.relaxed {
            true => b.arg("rdb-version-check", "relaxed"),
            false => b,
        }
    }
}

/// Every known binary other than the one under test that loads the RDB it writes, so takes its
/// data: a newer Redis, Valkey 9 (in relaxed mode where it needs that: see `reads_rdb`). None
/// for a server whose RDB version is not known here.
pub fn readers_of_this_server() -> Vec<Reader> {
    let this = Binary::under_test();
    let Some(rdb) = this.writes_rdb() else {
        return Vec::new();
    };
    let mut out: Vec<Reader> = Vec::new();
    for path in shared_redis().into_iter().chain(valkey()) {
        let Some(other) = Binary::of(&path) else {
            continue;
        };
        let same = |b: &Binary| b.version == other.version && b.valkey == other.valkey;
        if same(&this) || out.iter().any(|r| same(&r.binary)) {
            continue;
        }
        if let Some(relaxed) = [false, true].into_iter().find(|&r| other.reads_rdb(rdb, r)) {
            out.push(Reader {
                binary: other,
                relaxed,
            });
        }
    }
    out
}
