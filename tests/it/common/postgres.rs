//! A real PostgreSQL for the tests: one throwaway cluster per test process,
//! started on first use from Debian's server binaries (`scripts/test`
//! installs the `postgresql` package when it is missing), in a temporary
//! directory, on a free loopback port, with trust auth for the user
//! `tempora`. Each test gets a database of its own ([`database`]).
//!
//! The server is started with the parent-death signal set (from a thread
//! that lives as long as the process), so it goes when the test process
//! does, however that ends. As root (as CI runs), it runs
//! as the `postgres` system user, since PostgreSQL refuses to run as root.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

pub struct Cluster {
    pub port: u16,
    dir: PathBuf,
    server: Mutex<Child>,
}

/// Started on a thread that lives as long as the test process: the
/// parent-death signal follows the thread that spawned the server, and a
/// test's own thread ends with the test.
static CLUSTER: LazyLock<Cluster> = LazyLock::new(|| {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("test-postgres".into())
        .spawn(move || {
            tx.send(Cluster::start()).unwrap();
            loop {
                std::thread::park();
            }
        })
        .unwrap();
    rx.recv().expect("the test cluster did not start")
});
static NEXT_DB: AtomicU32 = AtomicU32::new(1);

/// The URL of a new, empty database of the test cluster.
pub async fn database() -> String {
    CLUSTER.new_database().await
}

/// A client of the cluster at `url`, retried while the server comes up
/// (its port opens a moment before it takes connections).
async fn connect_when_up(url: &str) -> tokio_postgres::Client {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match tokio_postgres::connect(url, tokio_postgres::NoTls).await {
            Ok((client, conn)) => {
                tokio::spawn(conn);
                return client;
            }
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("cannot connect to the test cluster: {e}"),
        }
    }
}

/// A client of `url`, its connection driven on the test's runtime.
pub async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls).await.expect("connect");
    tokio::spawn(conn);
    client
}

/// Server binaries: `$TEMPORA_TEST_PG_BIN`, or the newest
/// `/usr/lib/postgresql/<version>/bin` of version 15 or later.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TEMPORA_TEST_PG_BIN") {
        return dir.into();
    }
    let mut versions: Vec<u32> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    versions.sort();
    match versions.last() {
        Some(&v) if v >= 15 => PathBuf::from(format!("/usr/lib/postgresql/{v}/bin")),
        _ => panic!(
            "no PostgreSQL 15 or later under /usr/lib/postgresql: install Debian's postgresql package \
             (scripts/test does) or set TEMPORA_TEST_PG_BIN"
        ),
    }
}

/// The uid and gid to run the server as: the `postgres` user when root.
fn server_user() -> Option<(u32, u32)> {
    // SAFETY: getuid cannot fail; getpwnam returns a pointer into static
    // storage, read at once, and this runs before any other thread of the
    // test process looks users up.
    unsafe {
        if libc::getuid() != 0 {
            return None;
        }
        let pw = libc::getpwnam(c"postgres".as_ptr());
        assert!(!pw.is_null(), "running as root, but there is no postgres user to run PostgreSQL as");
        Some(((*pw).pw_uid, (*pw).pw_gid))
    }
}

fn command(bin: &Path, user: Option<(u32, u32)>) -> Command {
    let mut cmd = Command::new(bin);
    // SAFETY: the closure calls only async-signal-safe functions between
    // fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some((uid, gid)) = user {
                if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // After setuid, which clears it.
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd
}

/// Removes the directories of clusters whose test process is gone (their
/// servers went with it).
fn remove_stale_clusters() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for e in entries.flatten() {
        let name = e.file_name();
        // tempora-pg-<pid> or tempora-pg-<pid>-own<n>.
        let pid = name.to_str().and_then(|n| n.strip_prefix("tempora-pg-")).and_then(|r| r.split('-').next());
        let Some(pid) = pid.filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())) else { continue };
        if !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Cluster {
    /// The shared cluster of this test process.
    fn start() -> Cluster {
        remove_stale_clusters();
        Cluster::start_in(std::env::temp_dir().join(format!("tempora-pg-{}", std::process::id())))
    }

    /// A cluster of the calling test's own, to stop and start again; it
    /// goes when the thread that started it does (a test runtime's thread:
    /// with the test). Its directory is removed with the next test process.
    pub fn own() -> Cluster {
        let n = NEXT_DB.fetch_add(1, Ordering::Relaxed);
        Cluster::start_in(std::env::temp_dir().join(format!("tempora-pg-{}-own{n}", std::process::id())))
    }

    /// A cluster of the calling test's own, as [`Cluster::own`], with
    /// `setup`'s settings, files and `pg_hba.conf`.
    pub fn own_with(setup: &Setup) -> Cluster {
        let n = NEXT_DB.fetch_add(1, Ordering::Relaxed);
        Cluster::start_with(std::env::temp_dir().join(format!("tempora-pg-{}-own{n}", std::process::id())), setup)
    }

    /// [`Cluster::own_with`], started on a thread that lives as long as
    /// the test process (as the shared cluster is), for the tests of a
    /// module to share.
    pub fn for_the_process(setup: Setup) -> Cluster {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("test-postgres-own".into())
            .spawn(move || {
                tx.send(Cluster::own_with(&setup)).unwrap();
                loop {
                    std::thread::park();
                }
            })
            .unwrap();
        rx.recv().expect("the test cluster did not start")
    }

    fn start_in(dir: PathBuf) -> Cluster {
        Cluster::start_with(dir, &Setup::default())
    }

    fn start_with(dir: PathBuf, setup: &Setup) -> Cluster {
        let bin = bin_dir();
        let user = server_user();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        let data = dir.join("data");
        let out = command(&bin.join("initdb"), user)
            .args(["-D", data.to_str().unwrap(), "-U", "tempora", "--auth=trust", "--encoding=UTF8"])
            .args(["--locale=C.UTF-8", "--no-instructions"])
            .output()
            .expect("run initdb");
        assert!(out.status.success(), "initdb failed: {}", String::from_utf8_lossy(&out.stderr));
        setup.apply(&data, user);
        let port = free_port();
        let cluster = Cluster { port, server: Mutex::new(Cluster::spawn(&dir, port)), dir };
        cluster.wait_ready();
        cluster
    }

    /// The server on `dir`'s data: durable commits, as a production server
    /// has them (the durability tests kill processes and count acknowledged
    /// writes); a small cache.
    fn spawn(dir: &Path, port: u16) -> Child {
        let data = dir.join("data");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("server.log"));
        command(&bin_dir().join("postgres"), server_user())
            .args(["-D", data.to_str().unwrap(), "-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1"])
            .args(["-c", &format!("unix_socket_directories={}", dir.display())])
            .args(["-c", "fsync=on", "-c", "synchronous_commit=on", "-c", "shared_buffers=64MB"])
            .args(["-c", "max_connections=300"])
            .stdout(Stdio::null())
            .stderr(log.map(Stdio::from).unwrap_or(Stdio::null()))
            .spawn()
            .expect("start postgres")
    }

    /// Stops the server at once (SIGKILL: what a crash or a lost host does;
    /// PostgreSQL recovers from its WAL when started again).
    pub fn kill(&self) {
        let mut server = self.server.lock().unwrap();
        let _ = server.kill();
        let _ = server.wait();
        // Its backends end when they see the postmaster gone; the port and
        // the shared memory are free once they have.
        std::thread::sleep(Duration::from_millis(500));
    }

    /// Starts the server again on the same data and port. The killed
    /// server's backends may hold its shared memory a moment longer (they
    /// leave when they notice it gone): the new one then exits at once, and
    /// is started again.
    pub fn restart(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut server = Cluster::spawn(&self.dir, self.port);
            std::thread::sleep(Duration::from_millis(300));
            match server.try_wait() {
                Ok(Some(_)) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
                _ => {
                    *self.server.lock().unwrap() = server;
                    break;
                }
            }
        }
        self.wait_ready();
    }

    /// The URL of a new, empty database of this cluster.
    pub async fn new_database(&self) -> String {
        let name = format!("t{}_{}", std::process::id(), NEXT_DB.fetch_add(1, Ordering::Relaxed));
        let client = connect_when_up(&self.url("postgres")).await;
        client.batch_execute(&format!("CREATE DATABASE {name}")).await.expect("create a test database");
        self.url(&name)
    }

    /// The `key=value` URL of database `db` over the cluster's Unix socket
    /// (for a cluster whose `pg_hba.conf` asks more of TCP clients).
    pub fn socket_url(&self, db: &str) -> String {
        format!("host={} port={} user=tempora dbname={db}", self.dir.display(), self.port)
    }

    /// A client of the `postgres` database over the Unix socket, retried
    /// while the server comes up.
    pub async fn admin(&self) -> tokio_postgres::Client {
        connect_when_up(&self.socket_url("postgres")).await
    }

    fn url(&self, db: &str) -> String {
        format!("postgres://tempora@127.0.0.1:{}/{db}", self.port)
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
                panic!("the test PostgreSQL did not start within 30 s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// What a cluster of a test's own starts with besides the defaults
/// ([`Cluster::own_with`]).
#[derive(Default)]
pub struct Setup {
    /// Lines added to `postgresql.conf`, e.g. `ssl = on`.
    pub settings: Vec<String>,
    /// Files written into the data directory (certificates, keys), the
    /// server's own and readable by it alone, by name.
    pub files: Vec<(String, Vec<u8>)>,
    /// `pg_hba.conf` in full, instead of initdb's (trust for everyone).
    pub hba: Option<String>,
}

impl Setup {
    fn apply(&self, data: &Path, user: Option<(u32, u32)>) {
        use std::io::Write;
        use std::os::unix::fs::PermissionsExt;
        let own = |path: &Path| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
            if let Some((uid, gid)) = user {
                std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
            }
        };
        for (name, bytes) in &self.files {
            let path = data.join(name);
            std::fs::write(&path, bytes).unwrap();
            own(&path);
        }
        if let Some(hba) = &self.hba {
            let path = data.join("pg_hba.conf");
            std::fs::write(&path, hba).unwrap();
            own(&path);
        }
        if !self.settings.is_empty() {
            let mut conf = std::fs::OpenOptions::new().append(true).open(data.join("postgresql.conf")).unwrap();
            writeln!(conf, "\n# The test's own settings.\n{}", self.settings.join("\n")).unwrap();
        }
    }
}
