//! The systems under comparison behind one interface, so the driver, the
//! concurrency and the key choices are the same code for all three: only
//! the last step (the HTTP request or the SQL statement) differs.

use super::{mariadb, postgres, tempora};
use anyhow::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, clap::ValueEnum)]
pub enum Kind {
    Tempora,
    /// tempora serving from PostgreSQL (`--store postgres://…`), through
    /// one or more replicas.
    TemporaPg,
    Postgres,
    Mariadb,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Tempora => "tempora",
            Kind::TemporaPg => "tempora-pg",
            Kind::Postgres => "postgres",
            Kind::Mariadb => "mariadb",
        }
    }

    /// The server's process name, for its memory (`/proc/*/comm`).
    pub fn process(self) -> &'static str {
        match self {
            Kind::Tempora | Kind::TemporaPg => "tempora",
            Kind::Postgres => "postgres",
            Kind::Mariadb => "mariadbd",
        }
    }
}

/// One operation of a timed workload.
pub enum Op<'a> {
    /// W0: the smallest request the system answers (tempora `GET /api/health`,
    /// the peers a prepared `SELECT 1`): the floor under every read, of the
    /// client, the wire and the server's handling of a request.
    RoundTrip,
    /// W1 and the hot-key run: the key's new value, closing the active one in the same transaction.
    Supersede { subject: &'a str, object: &'a str },
    /// W2: the value valid now, as currently recorded.
    Current { subject: &'a str },
    /// W3: the value valid at `valid_ms` as it was recorded at `as_of_ms`.
    AsOf { subject: &'a str, as_of_ms: i64, valid_ms: i64 },
    /// W4: every fact of the subject, as currently recorded.
    History { subject: &'a str },
}

/// What an operation did: the rows it read or wrote, and how many times the
/// peer made it start again (deadlock, lock timeout, constraint race).
pub struct Done {
    pub rows: usize,
    pub retries: u32,
}

/// The correctness check after writes, over every key of the store.
#[derive(Default, Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Violations {
    /// Keys with more than one active open-ended value.
    pub duplicate_active: u64,
    /// Facts whose valid interval closes before it starts.
    pub inverted: u64,
    /// Pairs of current facts of one key whose valid intervals overlap.
    pub overlapping: u64,
    /// Facts checked.
    pub facts: u64,
    /// Fact versions the store holds, current and past (what its disk
    /// figure is divided by): tempora's facts and their closing versions;
    /// the peers' rows, current and history.
    #[serde(default)]
    pub versions: u64,
}

impl Violations {
    pub fn total(&self) -> u64 {
        self.duplicate_active + self.inverted + self.overlapping
    }
}

/// Counts violations among one key's current facts, given as
/// `(valid_from, valid_until, open_active)`.
pub fn check_key(facts: &mut [(i64, Option<i64>, bool)], v: &mut Violations) {
    v.facts += facts.len() as u64;
    if facts.iter().filter(|f| f.2).count() > 1 {
        v.duplicate_active += 1;
    }
    v.inverted += facts.iter().filter(|f| f.1.is_some_and(|u| u < f.0)).count() as u64;
    facts.sort_by_key(|f| f.0);
    for w in facts.windows(2) {
        // Empty intervals hold no instant, so they overlap nothing.
        let empty = |f: &(i64, Option<i64>, bool)| f.1.is_some_and(|u| u <= f.0);
        if !empty(&w[0]) && !empty(&w[1]) && w[0].1.is_none_or(|u| u > w[1].0) {
            v.overlapping += 1;
        }
    }
}

pub enum System {
    Tempora(tempora::Tempora),
    Postgres(postgres::Postgres),
    Mariadb(mariadb::Mariadb),
}

pub enum Conn {
    Tempora(tempora::Conn),
    Postgres(postgres::Conn),
    Mariadb(mariadb::Conn),
}

impl System {
    pub fn kind(&self) -> Kind {
        match self {
            System::Tempora(s) => s.kind(),
            System::Postgres(_) => Kind::Postgres,
            System::Mariadb(_) => Kind::Mariadb,
        }
    }

    /// Creates the schema (dropping a previous run's) or, for tempora,
    /// checks that the store is empty.
    pub async fn setup(&self) -> Result<()> {
        match self {
            System::Tempora(s) => s.setup().await,
            System::Postgres(s) => s.setup().await,
            System::Mariadb(s) => s.setup().await,
        }
    }

    pub async fn connect(&self) -> Result<Conn> {
        Ok(match self {
            System::Tempora(s) => Conn::Tempora(s.connect()?),
            System::Postgres(s) => Conn::Postgres(s.connect().await?),
            System::Mariadb(s) => Conn::Mariadb(s.connect().await?),
        })
    }

    /// W5: facts `0..size` of the data set through the system's own bulk
    /// path, `streams` at a time.
    pub async fn bulk_load(&self, size: u64, streams: usize) -> Result<()> {
        match self {
            System::Tempora(s) => s.bulk_load(size, streams).await,
            System::Postgres(s) => s.bulk_load(size, streams).await,
            System::Mariadb(s) => s.bulk_load(size, streams).await,
        }
    }

    /// Before the size on disk is read: PostgreSQL checkpoints.
    pub async fn settle(&self) -> Result<()> {
        match self {
            System::Postgres(s) => s.settle().await,
            System::Tempora(_) | System::Mariadb(_) => Ok(()),
        }
    }

    pub async fn check(&self) -> Result<Violations> {
        match self {
            System::Tempora(s) => s.check().await,
            System::Postgres(s) => s.check().await,
            System::Mariadb(s) => s.check().await,
        }
    }
}

impl Conn {
    pub async fn run(&mut self, op: &Op<'_>) -> Result<Done> {
        match self {
            Conn::Tempora(c) => c.run(op).await,
            Conn::Postgres(c) => c.run(op).await,
            Conn::Mariadb(c) => c.run(op).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_key_counts_each_kind_of_violation() {
        let mut v = Violations::default();
        // A clean history: closed, closed, open.
        check_key(&mut [(0, Some(10), false), (10, Some(20), false), (20, None, true)], &mut v);
        assert_eq!(v.total(), 0);
        // An empty interval where a newer fact took over at once is fine.
        check_key(&mut [(5, Some(5), false), (5, None, true)], &mut v);
        assert_eq!(v.total(), 0);
        check_key(&mut [(0, None, true), (10, None, true)], &mut v);
        assert_eq!((v.duplicate_active, v.overlapping), (1, 1));
        check_key(&mut [(10, Some(5), false)], &mut v);
        assert_eq!(v.inverted, 1);
        check_key(&mut [(0, Some(15), false), (10, None, true)], &mut v);
        assert_eq!(v.overlapping, 2);
        assert_eq!(v.facts, 10);
    }
}
