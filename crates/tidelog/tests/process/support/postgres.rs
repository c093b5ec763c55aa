//! A throwaway PostgreSQL cluster from Debian's `postgresql` package (scripts/test
//! installs it): `initdb` in a temp dir, `pg_ctl start` on a free loopback port with its
//! socket in the same dir, `pg_ctl stop -m immediate` and removal on drop.
//!
//! PostgreSQL refuses to run as root, and the tests do run as root (CI, the dev
//! machines): then every PostgreSQL command runs as the `postgres` OS user (the package
//! creates it), else `nobody`, through `runuser`, in a temp dir handed to that user.
//! Missing binaries fail the test with a message saying what to install: a sink test
//! that skips silently would pass without ever touching a database.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::free_port;

/// Where Debian puts the server binaries (one directory per major version); a `PATH`
/// that has them wins.
fn postgres_bin_dir() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    });
    if let Some(dir) = on_path {
        return dir;
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "PostgreSQL server binaries (initdb, pg_ctl) are neither on PATH nor under \
             /usr/lib/postgresql/<version>/bin: install Debian's `postgresql` package \
             (`apt-get install -y postgresql`; scripts/test does it) to run the \
             PostgreSQL sink tests"
        ),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The OS user the server runs as when the tests run as root.
fn server_user() -> &'static str {
    let exists = |user: &str| {
        Command::new("id")
            .arg("-u")
            .arg(user)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if exists("postgres") {
        "postgres"
    } else {
        "nobody"
    }
}

pub struct Postgres {
    pub port: u16,
    /// The socket directory (and the cluster's parent directory).
    dir: PathBuf,
    data: PathBuf,
    bin: PathBuf,
    /// `Some(user)` when commands run through `runuser -u user --`.
    run_as: Option<&'static str>,
    _temp: tempfile::TempDir,
    running: bool,
}

impl Postgres {
    /// initdb + start; waits until the server accepts connections (`pg_ctl -w`).
    pub fn start() -> Postgres {
        let bin = postgres_bin_dir();
        let run_as = is_root().then(server_user);
        let temp = tempfile::tempdir().expect("temp dir");
        let dir = temp.path().to_path_buf();
        if let Some(user) = run_as {
            let status = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(&dir)
                .status()
                .expect("run chown");
            assert!(status.success(), "chown {user} {}", dir.display());
        }
        let data = dir.join("data");
        let mut pg = Postgres {
            port: 0,
            dir,
            data,
            bin,
            run_as,
            _temp: temp,
            running: false,
        };
        pg.run_checked(
            "initdb",
            &[
                "-D".as_ref(),
                pg.data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "--no-instructions".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
            ],
        );
        // A port found free can be taken before the server binds it: try a few.
        let mut last = String::new();
        for _ in 0..4 {
            pg.port = free_port();
            let options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
                pg.port,
                pg.dir.display()
            );
            let log = pg.dir.join("server.log");
            let out = pg.run(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    pg.data.as_os_str(),
                    "-l".as_ref(),
                    log.as_os_str(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "60".as_ref(),
                    "-o".as_ref(),
                    options.as_ref(),
                    "start".as_ref(),
                ],
            );
            if out.status.success() {
                pg.running = true;
                return pg;
            }
            last = format!(
                "{}{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            eprintln!("pg_ctl start failed on port {}; retrying: {last}", pg.port);
        }
        panic!("PostgreSQL did not start: {last}");
    }

    /// A tokio-postgres connection string for the `postgres` superuser's database.
    pub fn config(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres connect_timeout=10",
            self.port
        )
    }

    /// A connected client (its connection driven by a spawned task).
    pub async fn connect(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.config(), tokio_postgres::NoTls)
            .await
            .expect("connect to the test PostgreSQL");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        client
    }

    fn run(&self, tool: &str, args: &[&std::ffi::OsStr]) -> Output {
        let exe = self.bin.join(tool);
        let mut cmd = match self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", exe.display()))
    }

    fn run_checked(&self, tool: &str, args: &[&std::ffi::OsStr]) {
        let out = self.run(tool, args);
        assert!(
            out.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn data_dir(&self) -> &Path {
        &self.data
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            let _ = self.run(
                "pg_ctl",
                &[
                    "-D".as_ref(),
                    self.data.as_os_str(),
                    "-m".as_ref(),
                    "immediate".as_ref(),
                    "-w".as_ref(),
                    "-t".as_ref(),
                    "30".as_ref(),
                    "stop".as_ref(),
                ],
            );
        }
    }
}
