//! The integration-test harness: real redis-server processes on free loopback ports.
//!
//! * The module under test is `target/release/liblcbloom.so` (`make test` builds it first), or
//!   the path in `LCBLOOM_MODULE`.
//! * The server binary is `redis-server`, or the path in `REDIS_SERVER` (`make test-valkey`
//!   points it at valkey-server).
//! * Each server gets its own temp dir (kept when the test panics, for the log), binds
//!   127.0.0.1 on a port found free just before, and is killed when the handle drops. Nothing
//!   here ever talks to a port it did not start.
//! * A panic the module caught at its boundary, which it logs and otherwise hides behind an
//!   error reply or a refused load, fails the test when its server ends, unless the test made
//!   the module panic (`ServerBuilder::panics_expected`).
//! * Submodules: `cmds` (command helpers) and `info` (INFO, BF.INFO, LC.INFO, settled
//!   `used_memory`), both re-exported here, `fixtures` (the golden files),
//!   `fuzz` (RNG, mutations, DUMP framing), `ops` (the operations tests' workload and
//!   encodings), `redisbloom` (servers running RedisBloom 2.8.2 and the RedisBloom filters the
//!   import tests compare), `servers` (the other server binaries known, and which load this
//!   one's data).
#![allow(dead_code)]

mod cmds;
pub mod fixtures;
pub mod fuzz;
mod info;
pub mod ops;
pub mod redisbloom;
pub mod servers;

pub use cmds::*;
pub use info::*;

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn module_path() -> PathBuf {
    match std::env::var_os("LCBLOOM_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/liblcbloom.so"),
    }
}

/// The module built with the fault-injection point (`make test` builds it).
pub fn fault_module_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fault-injection/liblcbloom.so")
}

pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// A port that was free a moment ago (and whose cluster-bus twin, port + 10000, is free too).
pub fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    /// Extra `--name value` arguments, kept for restarts.
    args: Vec<String>,
    module_args: Vec<String>,
    /// The module to load instead of lcbloom (RedisBloom, for the import tests).
    module: Option<PathBuf>,
    /// The server binary instead of `server_binary()`.
    binary: Option<String>,
    /// Environment variables of the server process.
    env: Vec<(String, String)>,
    /// A cap on the server process's address space, bytes (`prlimit --as`).
    address_space: Option<u64>,
    child: Option<Child>,
    keep_dir: bool,
    /// Whether the module may catch panics (the fault-injection build's): else a caught one,
    /// which the module logs and otherwise hides, fails the test when the server ends.
    panics_expected: bool,
    /// Where this server's lines start in the log, which a server reusing a dir appends to.
    log_from: u64,
    /// Whether its log showed a caught panic when its process ended (read then: a server
    /// sharing the dir may remove it first).
    caught_panic: bool,
}

pub struct ServerBuilder {
    args: Vec<String>,
    module_args: Vec<String>,
    dir: Option<PathBuf>,
    module: Option<PathBuf>,
    binary: Option<String>,
    env: Vec<(String, String)>,
    address_space: Option<u64>,
    panics_expected: bool,
}

impl ServerBuilder {
    /// A server option, e.g. `.arg("appendonly", "yes")`.
    pub fn arg(mut self, name: &str, value: &str) -> Self {
        self.args.push(format!("--{name}"));
        self.args.push(value.to_string());
        self
    }

    /// A module load argument, e.g. `.module_arg("bf-error-rate", "0.05")`.
    pub fn module_arg(mut self, name: &str, value: &str) -> Self {
        self.module_args.push(name.to_string());
        self.module_args.push(value.to_string());
        self
    }

    /// One fixed hash seed for every filter made without `SEED`: a test that asks about items
    /// never added gets, under a random seed, a false positive in a few runs of a hundred
    /// thousand, each run a different draw; fixed, every run gets the same answers. (Seeds
    /// themselves: bf_seed.rs.)
    pub fn fixed_seed(self) -> Self {
        self.module_arg("bf-seed", "20261125")
    }

    /// Load this module instead of lcbloom.
    pub fn module(mut self, path: &Path) -> Self {
        self.module = Some(path.to_path_buf());
        self
    }

    /// Run this server binary instead of `server_binary()`.
    pub fn binary(mut self, path: &str) -> Self {
        self.binary = Some(path.to_string());
        self
    }

    /// An environment variable of the server process.
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_string(), value.to_string()));
        self
    }

    /// A host that refuses memory: the server's address space capped at `bytes`, so that
    /// an allocation past it fails (as under `vm.overcommit_memory=2` or `ulimit -v`).
    pub fn address_space(mut self, bytes: u64) -> Self {
        self.address_space = Some(bytes);
        self
    }

    /// A server whose module is made to panic (fault injection): the panics it catches and
    /// logs are the test's subject, not a failure.
    pub fn panics_expected(mut self) -> Self {
        self.panics_expected = true;
        self
    }

    /// Reuse a data directory (to restart from its RDB or AOF files).
    pub fn dir(mut self, dir: &Path) -> Self {
        self.dir = Some(dir.to_path_buf());
        self
    }

    /// Starts a server that must refuse to start (bad data in its files): returns its log.
    pub fn start_expecting_failure(self) -> String {
        let mut server = self.server();
        let module = server.module.clone().unwrap_or_else(module_path);
        server.port = free_port();
        let mut child = server.command(&module).spawn().expect("start redis-server");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = child.try_wait() {
                // A refusal the module reached by catching a panic fails the test on drop.
                server.read_caught_panics();
                return server.log();
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        server.keep_dir = true;
        panic!("the server started; log:\n{}", server.log_tail());
    }

    /// Starts a server with the load argument `name value`, which it must refuse, saying what
    /// the argument allows (from `allowed` on).
    pub fn refusing_load_argument(name: &str, value: &str, allowed: &str) {
        let log = Server::builder()
            .module_arg(name, value)
            .start_expecting_failure();
        let said = format!("load argument '{name}' has the value '{value}'; allowed: {allowed}");
        assert!(log.contains(&said), "{log}");
    }

    pub fn start(self) -> Server {
        let mut server = self.server();
        server.launch();
        server
    }

    fn server(self) -> Server {
        let dir = self.dir.unwrap_or_else(temp_dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log_from = std::fs::metadata(dir.join("server.log")).map_or(0, |m| m.len());
        Server {
            port: 0,
            dir,
            args: self.args,
            module_args: self.module_args,
            module: self.module,
            binary: self.binary,
            env: self.env,
            address_space: self.address_space,
            child: None,
            keep_dir: false,
            panics_expected: self.panics_expected,
            log_from,
            caught_panic: false,
        }
    }
}

fn temp_dir() -> PathBuf {
    static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("lcbloom-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

impl Server {
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            args: Vec::new(),
            module_args: Vec::new(),
            dir: None,
            module: None,
            binary: None,
            env: Vec::new(),
            address_space: None,
            panics_expected: false,
        }
    }

    /// A new, empty data dir (for `ServerBuilder::dir`).
    pub fn fresh_dir() -> PathBuf {
        let dir = temp_dir();
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A plain server with the module and default configs.
    pub fn start() -> Server {
        Self::builder().start()
    }

    fn launch(&mut self) {
        let module = self.module.clone().unwrap_or_else(module_path);
        assert!(
            module.exists(),
            "{} is missing: run `make test` (it builds the module first)",
            module.display()
        );
        for _attempt in 0..5 {
            self.port = free_port();
            let child = self.command(&module).spawn().expect("start redis-server");
            self.child = Some(child);
            if self.wait_ready(Duration::from_secs(30)) {
                return;
            }
            self.kill();
            if !self.log().contains("Address already in use") {
                break;
            }
        }
        self.keep_dir = true;
        panic!("redis-server did not start; log:\n{}", self.log_tail());
    }

    /// The server's command line on `self.port`.
    fn command(&self, module: &Path) -> Command {
        let binary = self.binary.clone().unwrap_or_else(server_binary);
        let mut cmd = match self.address_space {
            // prlimit runs the server in its own process (exec), which the tests then own.
            Some(bytes) => {
                let mut cmd = Command::new("prlimit");
                cmd.arg(format!("--as={bytes}")).arg(binary);
                cmd
            }
            None => Command::new(binary),
        };
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--daemonize", "no"])
            .args(["--enable-debug-command", "yes"])
            .args(["--enable-module-command", "yes"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--logfile", "server.log"])
            .args(["--repl-diskless-sync-delay", "0"])
            .args(&self.args)
            .arg("--loadmodule")
            .arg(module)
            .args(&self.module_args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    fn wait_ready(&mut self, timeout: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    return false;
                }
            }
            if let Ok(client) = redis::Client::open(self.url()) {
                if let Ok(mut conn) = client.get_connection() {
                    if let Ok(reply) = redis::cmd("PING").query::<String>(&mut conn) {
                        if reply == "PONG" {
                            return true;
                        }
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A RESP2 connection.
    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .expect("connect")
    }

    /// A RESP3 connection.
    pub fn conn3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .unwrap()
            .get_connection()
            .expect("connect (RESP3)")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The lines this server wrote to the log.
    fn own_log(&self) -> String {
        let log = std::fs::read(self.dir.join("server.log")).unwrap_or_default();
        let from = usize::try_from(self.log_from).map_or(log.len(), |n| n.min(log.len()));
        String::from_utf8_lossy(&log[from..]).into_owned()
    }

    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// The process id, for tests that `kill -9` the server.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Kills the process (SIGKILL) and waits for it, keeping the data dir.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
            self.read_caught_panics();
        }
    }

    /// After its process ended: whether the module caught a panic (it logs each).
    fn read_caught_panics(&mut self) {
        self.caught_panic |= !self.panics_expected && self.own_log().contains(CAUGHT_PANIC);
    }

    /// `SHUTDOWN` with the given mode (`SAVE`/`NOSAVE`), then waits for the process to exit.
    pub fn shutdown(&mut self, mode: &str) {
        let mut conn = self.conn();
        let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg(mode).query(&mut conn);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
            self.read_caught_panics();
        }
    }

    /// Three masters with the module, joined by `redis-cli --cluster create` (all slots
    /// covered), once every node sees the cluster as ok.
    pub fn cluster() -> Vec<Server> {
        Self::cluster_with(|node| node)
    }

    /// [`Server::cluster`] with each node's builder given to `configure` first.
    pub fn cluster_with(configure: impl Fn(ServerBuilder) -> ServerBuilder) -> Vec<Server> {
        let nodes: Vec<Server> = (0..3)
            .map(|_| {
                configure(Server::builder())
                    .arg("cluster-enabled", "yes")
                    .arg("cluster-config-file", "nodes.conf")
                    .arg("cluster-node-timeout", "5000")
                    .start()
            })
            .collect();
        let mut args = vec!["create".to_string()];
        args.extend(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"].map(String::from));
        redis_cli_cluster(&args);
        let start = Instant::now();
        for node in &nodes {
            let mut c = node.conn();
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
                if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3") {
                    break;
                }
                assert!(start.elapsed() < Duration::from_secs(60), "{info}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        nodes
    }

    /// Starts the server again on a new port with the same dir, args and module args.
    /// A running server is shut down cleanly (`SHUTDOWN NOSAVE`: no new RDB, but the AOF is
    /// flushed, which a SIGKILL does not guarantee with `appendfsync everysec`); a killed one is
    /// just started again.
    pub fn restart(&mut self) {
        if self.alive() {
            self.shutdown("NOSAVE");
        }
        self.kill();
        self.launch();
    }

    /// Restarts with another module (same dir and server args), e.g. lcbloom after RedisBloom.
    pub fn restart_with_module(&mut self, module: &Path) {
        self.module = Some(module.to_path_buf());
        self.module_args.clear();
        self.restart();
    }

    /// Restarts with different module arguments (same dir and server args).
    pub fn restart_with_module_args(&mut self, module_args: &[(&str, &str)]) {
        self.module_args = module_args
            .iter()
            .flat_map(|(k, v)| [k.to_string(), v.to_string()])
            .collect();
        self.restart();
    }
}

/// What the module's panic boundary logs for each panic it catches (src/server/ffi.rs,
/// src/server/save.rs).
const CAUGHT_PANIC: &str = "lcbloom: internal error";

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
        let caught_panic = self.caught_panic && !std::thread::panicking();
        self.keep_dir |= caught_panic;
        if std::thread::panicking() || self.keep_dir {
            eprintln!(
                "server on port {} kept its dir {}; log tail:\n{}",
                self.port,
                self.dir.display(),
                self.log_tail()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        assert!(
            !caught_panic,
            "the module caught a panic on port {} (its dir is kept, the log names it)",
            self.port
        );
    }
}

/// Runs `redis-cli --cluster <args>`; fails the test with its output unless it succeeds.
pub fn redis_cli_cluster(args: &[String]) {
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .args(args)
        .output()
        .expect("redis-cli");
    assert!(
        out.status.success(),
        "redis-cli --cluster {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `lines` (commands, arguments separated by single spaces) to `dir` as a single-file
/// AOF, the form earlier servers wrote, which a server started there with `appendonly yes`
/// replays.
pub fn write_single_file_aof(dir: &Path, lines: &[&str]) {
    let mut aof = String::new();
    for line in lines {
        let args: Vec<&str> = line.split(' ').collect();
        aof += &format!("*{}\r\n", args.len());
        for a in args {
            aof += &format!("${}\r\n{a}\r\n", a.len());
        }
    }
    std::fs::write(dir.join("appendonly.aof"), aof).unwrap();
}

/// A tool some tests need is missing (`what`: which, and how to get it). Under `CI=true` (or
/// `CI=1`) that fails the test. Elsewhere the test skips, saying so on the terminal: straight
/// to stderr, since the harness captures `eprintln!` of a passing test.
pub fn missing(what: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "CI=true and a tool is missing: {what}");
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: missing {what} ***\n"
    );
}

/// A new data dir holding a copy of `server`'s AOF directory (`appendonlydir`) as it stands,
/// for another server to replay.
pub fn copy_of_aof(server: &Server) -> PathBuf {
    let dir = Server::fresh_dir();
    let (from, to) = (server.dir.join("appendonlydir"), dir.join("appendonlydir"));
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(&from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    dir
}

/// `DEBUG DIGEST-VALUE key` as a hex string.
pub fn digest(conn: &mut redis::Connection, key: &str) -> String {
    let reply: Vec<String> = redis::cmd("DEBUG")
        .arg("DIGEST-VALUE")
        .arg(key)
        .query(conn)
        .expect("DEBUG DIGEST-VALUE");
    reply.into_iter().next().unwrap_or_default()
}

/// Polls `done` every few milliseconds until it holds; after `limit`, fails with `what()`.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{}", what());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs the server's own checker on its files, as an operator would: `redis-check-rdb` on its
/// `dump.rdb`, or `redis-check-aof` on its AOF manifest (`tool`). A server binary is both
/// checkers when called by their names, so the check runs the binary the server runs, through
/// a link of that name. Fails the test with the checker's output unless it found the file
/// sound.
pub fn check_files(server: &Server, tool: &str) {
    let file = match tool {
        "redis-check-rdb" => server.dir.join("dump.rdb"),
        "redis-check-aof" => server.dir.join("appendonlydir/appendonly.aof.manifest"),
        _ => panic!("no checker {tool}"),
    };
    let binary = server.binary.clone().unwrap_or_else(server_binary);
    let binary = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {binary}"))
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .expect("sh");
    let rdb_base = std::fs::read_dir(server.dir.join("appendonlydir"))
        .into_iter()
        .flatten()
        .any(|f| f.is_ok_and(|f| f.file_name().to_string_lossy().ends_with(".base.rdb")));
    if tool == "redis-check-aof" && rdb_base && servers::Binary::of(&binary).unwrap().valkey {
        // Valkey 9.1's checker reads a base file in RDB form as commands and refuses it,
        // whatever the data (its RDB starts `VALKEY`, not `REDIS`): nothing to learn there.
        return;
    }
    let links = Server::fresh_dir();
    let checker = links.join(tool);
    std::os::unix::fs::symlink(&binary, &checker).unwrap();
    let out = Command::new(&checker).arg(&file).output().expect(tool);
    let _ = std::fs::remove_dir_all(&links);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let sound = said.contains("RDB looks OK") || said.contains("is valid");
    assert!(
        out.status.success() && sound,
        "{tool} {}: {said}",
        file.display()
    );
}

/// Polls `INFO persistence` until no AOF rewrite is running or scheduled.
pub fn wait_aof_rewrite(conn: &mut redis::Connection) {
    let mut info = String::new();
    let idle = |info: &str| {
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    };
    wait_until(
        Duration::from_secs(120),
        || {
            info = redis::cmd("INFO").arg("persistence").query(conn).unwrap();
            idle(&info)
        },
        || "AOF rewrite stuck".into(),
    );
    assert!(
        info.contains("aof_last_bgrewrite_status:ok"),
        "AOF rewrite failed: {info}"
    );
}

/// The error text of a failed command, or a panic if it succeeded.
/// Whether the server has Redis `major.minor`'s module API (Valkey 9 has Redis 7.4's).
pub fn has_redis_api(c: &mut redis::Connection, major: u32, minor: u32) -> bool {
    let info: String = redis::cmd("INFO").arg("server").query(c).unwrap();
    if info.contains("server_name:valkey") {
        return true;
    }
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .expect("redis_version");
    let mut parts = version.trim().split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap()) >= (major, minor)
}

pub fn err_text<T: std::fmt::Debug>(result: redis::RedisResult<T>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            let code = e.code().unwrap_or("").to_string();
            let detail = e.detail().unwrap_or("").to_string();
            format!("{code} {detail}").trim().to_string()
        }
    }
}
